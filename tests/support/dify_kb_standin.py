"""A loopback stand-in for a Dify server's Knowledge API, as the Dify source answers it.

What ``gcite ingest --url`` meets on a Dify server (``api/controllers/service_api/
dataset/*.py``): dataset and document paths take UUIDs only (``<uuid:dataset_id>``: a
name is an unknown URL), an unknown path or method is werkzeug's 404 / 405 in Dify's
error body, ``create-by-file`` needs a ``process_rule`` for a dataset's first document
and keeps no ``doc_metadata``. ``with_upload=False`` leaves the upload routes out (a
server whose Knowledge API lacks them). State lives in the object (``datasets``).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

NOT_FOUND = (
    "The requested URL was not found on the server. If you entered the URL manually "
    "please check your spelling and try again."
)
NOT_ALLOWED = "The method is not allowed for the requested URL."


class DifyKnowledgeStandin:
    """The stand-in's state and its ASGI app (:attr:`app`)."""

    def __init__(self, *, with_upload: bool = True) -> None:
        self.datasets: dict[str, dict[str, Any]] = {}
        self.documents: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[str] = []
        self.batches: dict[str, dict[str, Any]] = {}
        self.app = self._build(with_upload)

    def _build(self, with_upload: bool) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def record(request: Request, call_next: Any) -> Any:
            self.requests.append(f"{request.method} {request.url.path}")
            return await call_next(request)

        @app.exception_handler(HTTPException)
        async def werkzeug(_request: Request, exc: HTTPException) -> JSONResponse:
            if exc.status_code == 405:
                body = {"code": "method_not_allowed", "message": NOT_ALLOWED, "status": 405}
            else:
                body = {"code": "not_found", "message": NOT_FOUND, "status": 404}
            return JSONResponse(body, status_code=body["status"])

        @app.get("/v1/datasets")
        async def list_datasets() -> dict[str, Any]:
            data = list(self.datasets.values())
            return {"data": data, "has_more": False, "limit": 20, "total": len(data), "page": 1}

        @app.post("/v1/datasets")
        async def create_dataset(request: Request) -> dict[str, Any]:
            name = (await request.json())["name"]
            made = {"id": str(uuid.uuid4()), "name": name, "document_count": 0}
            self.datasets[made["id"]] = made
            self.documents[made["id"]] = []
            return made

        @app.delete("/v1/datasets/{dataset_id:uuid}")
        async def delete_dataset(dataset_id: uuid.UUID) -> Response:
            self.datasets.pop(str(dataset_id), None)
            self.documents.pop(str(dataset_id), None)
            return Response(status_code=204)

        @app.get("/v1/datasets/{dataset_id:uuid}/documents")
        async def list_documents(dataset_id: uuid.UUID) -> dict[str, Any]:
            data = self.documents[str(dataset_id)]
            return {"data": data, "has_more": False, "limit": 20, "total": len(data), "page": 1}

        @app.delete("/v1/datasets/{dataset_id:uuid}/documents/{document_id:uuid}")
        async def delete_document(dataset_id: uuid.UUID, document_id: uuid.UUID) -> Response:
            docs = self.documents[str(dataset_id)]
            docs[:] = [d for d in docs if d["id"] != str(document_id)]
            return Response(status_code=204)

        if with_upload:

            @app.post("/v1/datasets/{dataset_id:uuid}/document/create-by-file")
            async def create_by_file(dataset_id: uuid.UUID, request: Request) -> Any:
                form = await request.form()
                args = json.loads(str(form.get("data") or "{}"))
                docs = self.documents[str(dataset_id)]
                if not docs and not args.get("process_rule"):
                    body = {
                        "code": "invalid_param",
                        "message": "process_rule is required.",
                        "status": 400,
                    }
                    return JSONResponse(body, status_code=400)
                upload = form["file"]
                doc = {
                    "id": str(uuid.uuid4()),
                    "position": len(docs) + 1,
                    "name": getattr(upload, "filename", "") or "",
                    "created_at": int(time.time()),
                    "indexing_status": "waiting",
                    "doc_metadata": None,
                }
                docs.append(doc)
                batch = time.strftime("%Y%m%d%H%M%S") + uuid.uuid4().hex[:6]
                self.batches[batch] = doc
                return {"document": doc, "batch": batch}

            @app.get("/v1/datasets/{dataset_id:uuid}/documents/{batch}/indexing-status")
            async def indexing_status(dataset_id: uuid.UUID, batch: str) -> Any:
                # Dify indexes in a worker: the document is done by the first poll here
                doc = self.batches.get(batch)
                if doc is None:
                    body = {"code": "not_found", "message": "Documents not found.", "status": 404}
                    return JSONResponse(body, status_code=404)
                doc["indexing_status"] = "completed"
                return {"data": [{"id": doc["id"], "indexing_status": "completed", "error": None}]}

        return app


__all__ = ["DifyKnowledgeStandin"]
