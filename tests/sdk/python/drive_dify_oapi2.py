"""Drive gcite's Knowledge API with PyPI ``dify-oapi2`` (``client.knowledge.v1``).

Run by ``tests/sdk/test_knowledge_sdks.py`` in ``.venv-sdk/dify-knowledge``: datasets,
documents (text and file), indexing status, status actions, upload-file, segments,
child chunks, retrieve and tags through the SDK's builder requests; its pydantic
responses validate what gcite answers. The SDK reports an error answer on the response
(``success`` false) instead of raising: a step fails then. It has no metadata calls.
"""

from __future__ import annotations

import io
import json
import os
import time
from typing import Any

from dify_oapi.api.knowledge.v1.model import (
    bind_tags_to_dataset_request,
    bind_tags_to_dataset_request_body,
    create_dataset_request,
    create_dataset_request_body,
    create_document_by_file_request,
    create_document_by_file_request_body,
    create_document_by_file_request_body_data,
    create_document_by_text_request,
    create_document_by_text_request_body,
    create_segment_request,
    create_segment_request_body,
    create_tag_request,
    create_tag_request_body,
    delete_dataset_request,
    delete_document_request,
    delete_segment_request,
    delete_tag_request,
    delete_tag_request_body,
    get_batch_indexing_status_request,
    get_dataset_request,
    get_dataset_tags_request,
    get_document_request,
    get_segment_request,
    get_upload_file_info_request,
    list_child_chunks_request,
    list_datasets_request,
    list_documents_request,
    list_segments_request,
    list_tags_request,
    retrieval_model,
    retrieve_from_dataset_request,
    retrieve_from_dataset_request_body,
    segment_content,
    unbind_tags_from_dataset_request,
    unbind_tags_from_dataset_request_body,
    update_dataset_request,
    update_dataset_request_body,
    update_document_by_text_request,
    update_document_by_text_request_body,
    update_document_status_request,
    update_document_status_request_body,
    update_segment_request,
    update_segment_request_body,
    update_tag_request,
    update_tag_request_body,
)
from dify_oapi.client import Client
from dify_oapi.core.model.request_option import RequestOption
from scenario import run

FACT = "紫藤花园东侧的自行车棚夜间二十二点后上锁。"


def checked(response: Any) -> Any:
    """The response as plain data; an error answer raises."""
    if not response.success:
        raise RuntimeError(f"{response.code}: {response.msg}")
    return response.model_dump(mode="json", exclude={"raw"})


def indexed(kb: Any, option: RequestOption, ds: str, answer: Any) -> Any:
    """``answer`` (a create/update result, plain data) once its batch is indexed, polling
    the SDK's batch status call (its model does not read Dify's ``data`` list: the raw
    body is read); a hang guard of two minutes."""
    request = (
        get_batch_indexing_status_request.GetBatchIndexingStatusRequest.builder()
        .dataset_id(ds)
        .batch(answer["batch"])
        .build()
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        response = kb.document.get_batch_status(request, option)
        checked(response)
        [status] = json.loads(response.raw.content)["data"]
        if status["indexing_status"] in ("completed", "error"):
            return answer
        time.sleep(0.05)
    raise TimeoutError(f"batch {answer['batch']} not indexed")


def main() -> None:
    base = os.environ["GCITE_SDK_URL"].removesuffix("/v1")
    client = Client.builder().domain(base).timeout(120).build()
    option = RequestOption.builder().api_key(os.environ["GCITE_SDK_KEY"]).build()
    kb = client.knowledge.v1
    body = create_dataset_request_body.CreateDatasetRequestBody.builder()
    request = create_dataset_request.CreateDatasetRequest.builder()
    made = run(
        "create_dataset",
        lambda: checked(
            kb.dataset.create(
                request.request_body(body.name("oapi 数据集").description("oapi").build()).build(),
                option,
            )
        ),
    )
    ds = (made or {}).get("id", "")
    run(
        "list_datasets",
        lambda: checked(
            kb.dataset.list(
                list_datasets_request.ListDatasetsRequest.builder().page(1).build(), option
            )
        ),
    )
    run(
        "get_dataset",
        lambda: checked(
            kb.dataset.get(
                get_dataset_request.GetDatasetRequest.builder().dataset_id(ds).build(), option
            )
        ),
    )
    patch = update_dataset_request_body.UpdateDatasetRequestBody.builder().description("oapi 改")
    run(
        "update_dataset",
        lambda: checked(
            kb.dataset.update(
                update_dataset_request.UpdateDatasetRequest.builder()
                .dataset_id(ds)
                .request_body(patch.build())
                .build(),
                option,
            )
        ),
    )
    text_body = (
        create_document_by_text_request_body.CreateDocumentByTextRequestBody.builder()
        .name("bikes")
        .text(f"# 车棚\n\n{FACT}")
        .indexing_technique("high_quality")
        .build()
    )
    text = run(
        "create_by_text",
        lambda: indexed(
            kb,
            option,
            ds,
            checked(
                kb.document.create_by_text(
                    create_document_by_text_request.CreateDocumentByTextRequest.builder()
                    .dataset_id(ds)
                    .request_body(text_body)
                    .build(),
                    option,
                )
            ),
        ),
    )
    doc = ((text or {}).get("document") or {}).get("id", "")
    batch = (text or {}).get("batch", "")
    data = (
        create_document_by_file_request_body_data.CreateDocumentByFileRequestBodyData.builder()
        .indexing_technique("high_quality")
        .build()
    )
    file_body = (
        create_document_by_file_request_body.CreateDocumentByFileRequestBody.builder()
        .data(data)
        .build()
    )
    run(
        "create_by_file",
        lambda: indexed(
            kb,
            option,
            ds,
            checked(
                kb.document.create_by_file(
                    create_document_by_file_request.CreateDocumentByFileRequest.builder()
                    .dataset_id(ds)
                    .request_body(file_body)
                    .file(io.BytesIO("# 访客\n\n访客须在一层大堂登记。".encode()), "visitor.md")
                    .build(),
                    option,
                )
            ),
        ),
    )
    run(
        "list_documents",
        lambda: checked(
            kb.document.list(
                list_documents_request.ListDocumentsRequest.builder().dataset_id(ds).build(), option
            )
        ),
    )
    run(
        "get_document",
        lambda: checked(
            kb.document.get(
                get_document_request.GetDocumentRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .build(),
                option,
            )
        ),
    )
    run(
        "indexing_status",
        lambda: checked(
            kb.document.get_batch_status(
                get_batch_indexing_status_request.GetBatchIndexingStatusRequest.builder()
                .dataset_id(ds)
                .batch(batch)
                .build(),
                option,
            )
        ),
    )
    update_body = (
        update_document_by_text_request_body.UpdateDocumentByTextRequestBody.builder()
        .text(f"# 车棚\n\n{FACT}更新。")
        .build()
    )
    run(
        "update_by_text",
        lambda: indexed(
            kb,
            option,
            ds,
            checked(
                kb.document.update_by_text(
                    update_document_by_text_request.UpdateDocumentByTextRequest.builder()
                    .dataset_id(ds)
                    .document_id(doc)
                    .request_body(update_body)
                    .build(),
                    option,
                )
            ),
        ),
    )
    ids = update_document_status_request_body.UpdateDocumentStatusRequestBody.builder()
    run(
        "status_enable",
        lambda: checked(
            kb.document.update_status(
                update_document_status_request.UpdateDocumentStatusRequest.builder()
                .dataset_id(ds)
                .action("enable")
                .request_body(ids.document_ids([doc]).build())
                .build(),
                option,
            )
        ),
    )
    run(
        "upload_file",
        lambda: checked(
            kb.document.file_info(
                get_upload_file_info_request.GetUploadFileInfoRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .build(),
                option,
            )
        ),
    )
    segments_of(kb, option, ds, doc)
    model = retrieval_model.RetrievalModel.builder().top_k(2).build()
    query = (
        retrieve_from_dataset_request_body.RetrieveFromDatasetRequestBody.builder()
        .query("自行车棚几点上锁")
        .retrieval_model(model)
        .build()
    )
    run(
        "retrieve",
        lambda: checked(
            kb.dataset.retrieve(
                retrieve_from_dataset_request.RetrieveFromDatasetRequest.builder()
                .dataset_id(ds)
                .request_body(query)
                .build(),
                option,
            )
        ),
    )
    tags(kb, option, ds)
    run(
        "delete_document",
        lambda: checked(
            kb.document.delete(
                delete_document_request.DeleteDocumentRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .build(),
                option,
            )
        ),
    )
    run(
        "delete_dataset",
        lambda: checked(
            kb.dataset.delete(
                delete_dataset_request.DeleteDatasetRequest.builder().dataset_id(ds).build(), option
            )
        ),
    )


def segments_of(kb: Any, option: RequestOption, ds: str, doc: str) -> None:
    """The segment and child-chunk steps on document ``doc``."""
    listed = run(
        "list_segments",
        lambda: checked(
            kb.segment.list(
                list_segments_request.ListSegmentsRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .build(),
                option,
            )
        ),
    )
    first = ((listed or {}).get("data") or [{}])[0].get("id", "")
    content = segment_content.SegmentContent.builder().content("车棚旁边设有充电桩。").build()
    made = run(
        "create_segment",
        lambda: checked(
            kb.segment.create(
                create_segment_request.CreateSegmentRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .request_body(
                    create_segment_request_body.CreateSegmentRequestBody.builder()
                    .segments([content])
                    .build()
                )
                .build(),
                option,
            )
        ),
    )
    new = ((made or {}).get("data") or [{}])[0].get("id", "")
    run(
        "get_segment",
        lambda: checked(
            kb.segment.get(
                get_segment_request.GetSegmentRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .segment_id(first)
                .build(),
                option,
            )
        ),
    )
    changed = segment_content.SegmentContent.builder().content("车棚旁边设有两个充电桩。").build()
    run(
        "update_segment",
        lambda: checked(
            kb.segment.update(
                update_segment_request.UpdateSegmentRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .segment_id(new)
                .request_body(
                    update_segment_request_body.UpdateSegmentRequestBody.builder()
                    .segment(changed)
                    .build()
                )
                .build(),
                option,
            )
        ),
    )
    run(
        "child_chunks",
        lambda: checked(
            kb.chunk.list(
                list_child_chunks_request.ListChildChunksRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .segment_id(first)
                .build(),
                option,
            )
        ),
    )
    run(
        "delete_segment",
        lambda: checked(
            kb.segment.delete(
                delete_segment_request.DeleteSegmentRequest.builder()
                .dataset_id(ds)
                .document_id(doc)
                .segment_id(new)
                .build(),
                option,
            )
        ),
    )


def raw(response: Any) -> Any:
    """The JSON body of a successful response (the SDK's list models do not read Dify's
    bare list of tags)."""
    checked(response)
    return json.loads(response.raw.content)


def tags(kb: Any, option: RequestOption, ds: str) -> None:
    """Every tag call of the SDK, each step reading back what the one before wrote."""

    def create(name: str) -> Any:
        body = create_tag_request_body.CreateTagRequestBody.builder().name(name)
        request = create_tag_request.CreateTagRequest.builder().request_body(
            body.type("knowledge").build()
        )
        return checked(kb.tag.create(request.build(), option))

    one = (run("create_tag", lambda: create("安防")) or {}).get("id", "")
    two = (run("create_tag_2", lambda: create("访客")) or {}).get("id", "")
    rename = update_tag_request_body.UpdateTagRequestBody.builder().tag_id(one).name("安防巡逻")
    run(
        "update_tag",
        lambda: checked(
            kb.tag.update(
                update_tag_request.UpdateTagRequest.builder().request_body(rename.build()).build(),
                option,
            )
        ),
    )
    bind = bind_tags_to_dataset_request_body.BindTagsToDatasetRequestBody.builder()
    run(
        "bind_tags",
        lambda: checked(
            kb.tag.bind(
                bind_tags_to_dataset_request.BindTagsToDatasetRequest.builder()
                .request_body(bind.target_id(ds).tag_ids([one, two]).build())
                .build(),
                option,
            )
        ),
    )
    on_dataset = get_dataset_tags_request.GetDatasetTagsRequest.builder().dataset_id(ds).build()
    run("dataset_tags", lambda: checked(kb.tag.get_dataset_tags(on_dataset, option)))
    listing = list_tags_request.ListTagsRequest.builder().type("knowledge").build()
    run("list_tags", lambda: raw(kb.tag.list(listing, option)))
    unbind = unbind_tags_from_dataset_request_body.UnbindTagsFromDatasetRequestBody.builder()
    run(
        "unbind_tag",
        lambda: checked(
            kb.tag.unbind(
                unbind_tags_from_dataset_request.UnbindTagsFromDatasetRequest.builder()
                .request_body(unbind.target_id(ds).tag_id(two).build())
                .build(),
                option,
            )
        ),
    )
    run("dataset_tags_after", lambda: checked(kb.tag.get_dataset_tags(on_dataset, option)))
    delete = delete_tag_request_body.DeleteTagRequestBody.builder().tag_id(two).build()
    run(
        "delete_tag",
        lambda: checked(
            kb.tag.delete(
                delete_tag_request.DeleteTagRequest.builder().request_body(delete).build(), option
            )
        ),
    )
    run("list_tags_after", lambda: raw(kb.tag.list(listing, option)))
    last = delete_tag_request_body.DeleteTagRequestBody.builder().tag_id(one).build()
    run(
        "delete_last_tag",
        lambda: checked(
            kb.tag.delete(
                delete_tag_request.DeleteTagRequest.builder().request_body(last).build(), option
            )
        ),
    )


if __name__ == "__main__":
    main()
