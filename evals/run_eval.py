"""Measurement harness: `python -m evals.run_eval {retrieval,latency,abstention,citations,answers,slack-load}`."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from bot.settings import load_settings
from bot.wiring import Components
from core.embedding import quiet_model_loading
from core.retrieval import ENGLISH, OTHER_LANGUAGES, RetrievalConfig, Retriever
from evals.metrics import DEFAULT_QUESTIONS, load_questions, rank_of, summarise


def evaluate_retrieval(retriever: Retriever, questions, k: int) -> dict:
    answerable = [q for q in questions if q.answerable]
    per_question = []
    for q in answerable:
        ranked = [p.source_id for p in retriever.run(q.question, k=max(k, 10)).passages]
        per_question.append({"id": q.id, "lang": q.lang, "expected": list(q.expected), "ranked": ranked[:10],
                             "rank": rank_of(q.expected, ranked)})
    by_lang = {}
    for lang in sorted({row["lang"] for row in per_question}):
        by_lang[lang] = summarise([r["rank"] for r in per_question if r["lang"] == lang], k)
    overall = summarise([r["rank"] for r in per_question], k)
    return {**overall, "k": k, "by_lang": by_lang, "per_question": per_question}


def _print_retrieval(result: dict) -> None:
    for row in result["per_question"]:
        mark = "ok " if row["rank"] == 1 else ("   " if row["rank"] else "MISS")
        print(f"{mark} {row['id']:<8} rank={row['rank']!s:<4} expected={','.join(row['expected'])} top={', '.join(row['ranked'][:3])}")
    print()
    print(f"{'lang':<6}{'n':>4}{'hit@1':>8}{'recall@' + str(result['k']):>10}{'MRR':>7}")
    for lang, m in result["by_lang"].items():
        print(f"{lang:<6}{m['n']:>4}{m['hit_at_1']:>8.3f}{m['recall_at_k']:>10.3f}{m['mrr']:>7.3f}")
    print(f"{'all':<6}{result['n']:>4}{result['hit_at_1']:>8.3f}{result['recall_at_k']:>10.3f}{result['mrr']:>7.3f}")


def _both(**change) -> dict:
    """The same change to the English and the other-languages weights."""
    return {"english": replace(ENGLISH, **change), "other": replace(OTHER_LANGUAGES, **change)}


SWEEP = {
    "default": {},
    "rrf": {"fusion": "rrf"},
    "no-vocabulary": {"vocabulary": False},
    "no-guides": _both(guide_dense=0.0, guide_words=0.0, native_guide_words=0.0, native_guide_grams=0.0),
    "no-article-term": _both(article=0.0),
    "no-grams": _both(grams=0.0),
    "text-only (naive)": _both(guide_dense=0.0, guide_words=0.0, native_guide_words=0.0, native_guide_grams=0.0,
                                article=0.0, dense=1.0, words=1.0, english_words=0.3),
    "dense-only": _both(words=0.0, grams=0.0, guide_words=0.0, native_guide_words=0.0, native_guide_grams=0.0,
                        english_words=0.0),
    "bm25-only": _both(dense=0.0, guide_dense=0.0, title=0.0),
}


def cmd_retrieval(args, components: Components) -> int:
    questions = load_questions(args.questions)
    retriever = components.retriever
    if args.sweep:
        rows = {}
        for name, change in SWEEP.items():
            result = evaluate_retrieval(retriever.with_config(replace(RetrievalConfig(), **change)), questions, args.k)
            en = result["by_lang"].get("en", {})
            other = summarise([r["rank"] for r in result["per_question"] if r["lang"] != "en"], args.k)
            rows[name] = {"all": {k: result[k] for k in ("hit_at_1", "recall_at_k", "mrr")}, "en": en, "other": other}
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print(f"{'configuration':<18}{'EN hit@1':>9}{'EN R@' + str(args.k):>8}{'EN MRR':>8}{'other hit@1':>13}{'other MRR':>11}")
            for name, row in rows.items():
                print(f"{name:<18}{row['en']['hit_at_1']:>9.3f}{row['en']['recall_at_k']:>8.3f}{row['en']['mrr']:>8.3f}"
                      f"{row['other']['hit_at_1']:>13.3f}{row['other']['mrr']:>11.3f}")
        return 0
    result = evaluate_retrieval(retriever, questions, args.k)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        _print_retrieval(result)
    return 0


def cmd_latency(args, components: Components) -> int:
    from evals.latency import measure

    result = measure(components, load_questions(args.questions), rounds=args.rounds)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def evaluate_abstention(service, questions) -> dict:
    answerable = [q for q in questions if q.answerable]
    unanswerable = [q for q in questions if not q.answerable]
    wrongly_refused = [q.id for q in answerable if service.ask(q.question).abstained]
    missed = [q.id for q in unanswerable if not service.ask(q.question).abstained]
    return {"n_unanswerable": len(unanswerable), "abstained_unanswerable": 1 - len(missed) / max(1, len(unanswerable)),
            "n_answerable": len(answerable), "abstained_answerable": len(wrongly_refused) / max(1, len(answerable)),
            "answered_unanswerable_ids": missed, "refused_answerable_ids": wrongly_refused}


def unlimited_service(components: Components):
    """The bot's answer pipeline without fair-use limits or audit rows: evals ask hundreds of questions at once."""
    from core.assistant import Assistant

    return Assistant(components.retriever, components.generator, max_question_chars=components.settings.max_question_chars)


def cmd_abstention(args, components: Components) -> int:
    result = evaluate_abstention(unlimited_service(components), load_questions(args.questions))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"unanswerable abstained: {result['abstained_unanswerable']:.3f} of {result['n_unanswerable']}"
              f"  (answered: {', '.join(result['answered_unanswerable_ids']) or 'none'})")
        print(f"answerable refused:     {result['abstained_answerable']:.3f} of {result['n_answerable']}"
              f"  (refused: {', '.join(result['refused_answerable_ids']) or 'none'})")
    return 0


def cmd_citations(args, components: Components) -> int:
    from evals.citations import evaluate_citations

    result = evaluate_citations(components, load_questions(args.questions))
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def cmd_answers(args, components: Components) -> int:
    if not components.settings.groq_api_key:
        print("GROQ_API_KEY is not set: the LLM mode was not run. Set it (and optionally GROQ_MODEL) to measure it.")
        return 0
    questions = load_questions(args.questions)[: args.limit]
    result = evaluate_abstention(unlimited_service(components), questions)
    result["mode"] = components.generator.mode
    print(json.dumps(result, indent=2))
    return 0


def cmd_slack_load(args, components: Components) -> int:
    from evals import slack_load

    slack_load.run(args, components.service)
    return 0


def cmd_ops_load(args, components: Components) -> int:
    from evals import ops_load

    result = ops_load.run(**{name: getattr(args, name) for name in ops_load.RUN_ARGS})
    return 0 if result["passed"] else 1


def cmd_documents(args, components: Components) -> int:
    from evals import doc_benchmark

    print(json.dumps(doc_benchmark.run(args.pages), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.run_eval", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    retrieval = commands.add_parser("retrieval", help="hit@1, recall@k and MRR on a questions file")
    retrieval.add_argument("--k", type=int, default=5)
    retrieval.add_argument("--sweep", action="store_true", help="compare fusion/vocabulary/title configurations")
    latency = commands.add_parser("latency", help="retrieval p50/p95, index build and warm start, peak RSS")
    latency.add_argument("--rounds", type=int, default=3)
    abstention = commands.add_parser("abstention", help="share of unanswerable abstained, answerable refused")
    citations = commands.add_parser("citations", help="verbatim and retrieved shares, extractive and adversarial LLM")
    answers = commands.add_parser("answers", help="the LLM mode end to end (needs GROQ_API_KEY)")
    answers.add_argument("--limit", type=int, default=40)
    for sub in (retrieval, latency, abstention, citations, answers):
        sub.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
        sub.add_argument("--json", action="store_true")
    from evals import slack_load

    slack_load.add_arguments(commands.add_parser("slack-load", help="N concurrent signed mentions to the Slack app"))
    from evals import ops_load

    ops_load.add_arguments(commands.add_parser("ops-load", help="N signed mentions over D s to a real bot process"))
    documents = commands.add_parser("documents", help="index a generated N-page PDF")
    documents.add_argument("--pages", type=int, default=100)
    args = parser.parse_args(argv)
    quiet_model_loading()
    components = Components(load_settings())
    handlers = {"retrieval": cmd_retrieval, "latency": cmd_latency, "abstention": cmd_abstention,
                "citations": cmd_citations, "answers": cmd_answers, "slack-load": cmd_slack_load,
                "ops-load": cmd_ops_load, "documents": cmd_documents}
    return handlers[args.command](args, components)


if __name__ == "__main__":
    sys.exit(main())
