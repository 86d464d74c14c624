"""`python -m evals.run_eval retrieval`: hit@1, recall@k and MRR per set, split and language; `--sweep`
compares configurations (what each mechanism is worth)."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from core.retrieval import RetrievalConfig, Retriever
from evals.metrics import Question, rank_of, summarise

DEPTH = 10


def ranks(retriever: Retriever, questions: Sequence[Question]) -> list[dict]:
    """One row per answerable question: its set-independent facts and the rank of its first expected id."""
    rows = []
    for q in questions:
        if not q.is_answerable:
            continue
        ranked = [p.source_id for p in retriever.run(q.question, k=DEPTH).passages]
        rows.append({"id": q.id, "lang": q.lang, "split": q.split or "all", "style": q.style,
                     "expected": list(q.expected), "top": ranked[:3], "rank": rank_of(q.expected, ranked)})
    return rows


def report(rows_by_set: Mapping[str, list[dict]], k: int) -> dict:
    """Per set: all, dev and test; and per language over every set with per-language questions."""
    sets = {}
    for name, rows in rows_by_set.items():
        splits = {"all": summarise([r["rank"] for r in rows], k)}
        for split in sorted({r["split"] for r in rows} - {"all"}):
            splits[split] = summarise([r["rank"] for r in rows if r["split"] == split], k)
        sets[name] = splits
    languages = {}
    for name in ("en", "languages"):
        for lang in sorted({r["lang"] for r in rows_by_set.get(name, ())}):
            rows = [r for r in rows_by_set[name] if r["lang"] == lang]
            languages[lang] = {"all": summarise([r["rank"] for r in rows], k),
                               "test": summarise([r["rank"] for r in rows if r["split"] == "test"], k)}
    return {"k": k, "sets": sets, "languages": languages}


def print_report(result: dict) -> None:
    k = result["k"]
    print(f"{'set':<13}{'split':<7}{'n':>5}{'hit@1':>8}{'recall@' + str(k):>10}{'MRR':>7}")
    for name, splits in result["sets"].items():
        for split, m in splits.items():
            print(f"{name:<13}{split:<7}{m['n']:>5}{m['hit_at_1']:>8.3f}{m['recall_at_k']:>10.3f}{m['mrr']:>7.3f}")
    if result["languages"]:
        print(f"\n{'lang':<6}{'n':>4}{'hit@1':>8}{'recall@' + str(k):>10}{'test n':>8}{'test hit@1':>12}"
              f"{'test R@' + str(k):>10}")
        for lang, m in result["languages"].items():
            a, t = m["all"], m["test"]
            print(f"{lang:<6}{a['n']:>4}{a['hit_at_1']:>8.3f}{a['recall_at_k']:>10.3f}{t['n']:>8}"
                  f"{t['hit_at_1']:>12.3f}{t['recall_at_k']:>10.3f}")


def sweep(retriever: Retriever, sets: Mapping[str, Sequence[Question]], configurations: Mapping[str, dict],
          k: int, split: str) -> dict:
    """hit@1 / recall@k per set on `split` for each configuration (changes to RetrievalConfig)."""
    table = {}
    for name, change in configurations.items():
        variant = retriever.with_config(replace(retriever.config, **change))
        table[name] = {s: summarise([r["rank"] for r in ranks(variant, qs) if split == "all" or r["split"] == split],
                                    k) for s, qs in sets.items()}
    return table


def print_sweep(table: dict, k: int) -> None:
    sets = list(next(iter(table.values())))
    print(f"{'configuration':<24}" + "".join(f"{s + ' h@1':>16}{'R@' + str(k):>6}" for s in sets))
    for name, row in table.items():
        print(f"{name:<24}" + "".join(f"{row[s]['hit_at_1']:>16.3f}{row[s]['recall_at_k']:>6.3f}" for s in sets))


def dumps(result: dict) -> str:
    return json.dumps(result, ensure_ascii=False)


__all__ = ["RetrievalConfig", "dumps", "print_report", "print_sweep", "ranks", "report", "sweep"]
