"""Measurement harness: `python -m evals.run_eval COMMAND` (see `--help`); every figure in the README comes from here.

Question-based commands read the committed sets in `evals/data/` (and the outside set in
`../shared/evalsets/`, reported on its own); `--limit N` takes the first N questions of each set, for a
quick run or a smoke test.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from bot.settings import load_settings
from bot.wiring import Components
from core.abstain import REASONS
from core.embedding import quiet_model_loading
from core.models import AbstentionReason
from core.retrieval import ENGLISH, OTHER_LANGUAGES
from evals import retrieval as retrieval_eval
from evals.metrics import ABSTENTION_SET, RETRIEVAL_SETS, Question, load_questions
from evals.train_abstention import RULE_CATEGORY


def _sets(args) -> dict[str, list[Question]]:
    """The question sets a command runs on: `--questions FILE`, else the named `--set`s that exist."""
    if getattr(args, "questions", None):
        chosen = {args.questions.stem: args.questions}
    else:
        chosen = {name: path for name, path in RETRIEVAL_SETS.items() if name in (args.set or RETRIEVAL_SETS)}
    missing = [str(path) for name, path in chosen.items() if not path.is_file() and name != "outside"]
    if missing:
        raise SystemExit(f"error: question set(s) not found: {', '.join(missing)}")
    return {name: load_questions(path)[: args.limit] for name, path in chosen.items() if path.is_file()}


def _both(**change) -> dict:
    """The same change to the English and the other-languages weights."""
    return {"english": replace(ENGLISH, **change), "other": replace(OTHER_LANGUAGES, **change)}


NO_GUIDES = {"guide_dense": 0.0, "guide_words": 0.0, "guide_grams": 0.0}
SWEEP = {
    "default": {},
    "rrf instead of z-scores": {"fusion": "rrf"},
    "no lay vocabulary": {"vocabulary": False},
    "no provision guides": _both(**NO_GUIDES),
    "no named-provision signal": _both(referenced=0.0),
    "no article-level term": _both(article=0.0),
    "no character n-grams": _both(grams=0.0, guide_grams=0.0),
    "text only (naive)": _both(**NO_GUIDES, article=0.0, dense=1.0, words=1.0, english_words=0.3),
    "dense only": _both(words=0.0, grams=0.0, guide_words=0.0, guide_grams=0.0, english_words=0.0),
    "bm25 only": _both(dense=0.0, guide_dense=0.0, title=0.0),
    "other languages + English model": {"other": replace(OTHER_LANGUAGES, dense=0.4, guide_dense=0.4, title=0.2)},
}


def cmd_retrieval(args, components: Components) -> int:
    sets = _sets(args)
    retriever = components.retriever
    if args.sweep:
        table = retrieval_eval.sweep(retriever, sets, SWEEP, args.k, args.split)
        print(json.dumps(table) if args.json else "", end="\n" if args.json else "")
        if not args.json:
            print(f"split: {args.split}")
            retrieval_eval.print_sweep(table, args.k)
        return 0
    result = retrieval_eval.report({name: retrieval_eval.ranks(retriever, qs) for name, qs in sets.items()}, args.k)
    if args.json:
        print(retrieval_eval.dumps(result))
    else:
        retrieval_eval.print_report(result)
    return 0


def cmd_latency(args, components: Components) -> int:
    from evals.latency import measure

    questions = [q for qs in _sets(args).values() for q in qs]
    print(json.dumps(measure(components, questions, rounds=args.rounds), indent=None if args.json else 2))
    return 0


def cmd_memory(args, components: Components) -> int:
    from evals import memory

    questions = [q for name in ("en", "languages") for q in _sets(args).get(name, ())]
    print(json.dumps(memory.measure(questions, n=args.n, rounds=args.rounds), indent=None if args.json else 2))
    return 0


def expected_reason(question: Question) -> AbstentionReason | None:
    """The reason an unanswerable question of the team's sets should be declined with (None: no category)."""
    if question.category == RULE_CATEGORY:
        return AbstentionReason.NO_SUCH_PROVISION
    return REASONS.get(question.category or "")


def reason_counts(declined: list[tuple[Question, AbstentionReason]]) -> dict[str, int]:
    """How the declined unanswerable questions were told why: the right reason, a wrong one, or the generic one."""
    given_and_expected = [(reason, expected_reason(q)) for q, reason in declined]
    verdicts = Counter("generic" if given == AbstentionReason.NOT_COVERED else "right" if given == expected else "wrong"
                       for given, expected in given_and_expected if expected is not None)
    return {f"reason_{verdict}": verdicts[verdict] for verdict in ("right", "wrong", "generic")}


def evaluate_abstention(service, questions) -> dict:
    """Per split and language group: unanswerable questions declined and answerable ones refused, with counts, and
    whether the declined ones were given the right reason."""
    rows = [(q, service.ask(q.question).abstention) for q in questions]
    groups: dict[str, dict] = {}
    for split in sorted({q.split or "all" for q, _ in rows}):
        for lang, keep in (("en", lambda q: q.lang == "en"), ("other", lambda q: q.lang != "en"), ("all", lambda q: True)):
            chosen = [(q, a) for q, a in rows if (q.split or "all") == split and keep(q)]
            unanswerable = [(q, a) for q, a in chosen if not q.is_answerable]
            answerable = [(q, a) for q, a in chosen if q.is_answerable]
            if chosen:
                groups[f"{split}/{lang}"] = {
                    "unanswerable": len(unanswerable), "declined": sum(a is not None for _, a in unanswerable),
                    "answerable": len(answerable), "refused": sum(a is not None for _, a in answerable),
                    "refused_ids": [q.id for q, a in answerable if a is not None],
                    "answered_ids": [q.id for q, a in unanswerable if a is None],
                    **reason_counts([(q, a.reason) for q, a in unanswerable if a is not None])}
    return groups


def unlimited_service(components: Components):
    """The bot's answer pipeline without fair-use limits or audit rows: evals ask hundreds of questions at once."""
    return components.assistant()


def _share(part: int, whole: int) -> str:
    return f"{part / whole:6.1%} ({part}/{whole})" if whole else "     -"


def cmd_abstention(args, components: Components) -> int:
    sets = {"abstention": load_questions(args.questions or ABSTENTION_SET)[: args.limit]}
    outside = RETRIEVAL_SETS["outside"]
    if not args.questions and outside.is_file():
        sets["outside"] = load_questions(outside)[: args.limit]
    result = {name: evaluate_abstention(unlimited_service(components), qs) for name, qs in sets.items()}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'set':<12}{'split/lang':<14}{'unanswerable declined':>26}{'answerable refused':>24}"
          f"{'reason right / wrong / generic':>34}")
    for name, groups in result.items():
        for group, g in groups.items():
            reasons = f"{g['reason_right']} / {g['reason_wrong']} / {g['reason_generic']}" if g["declined"] else "-"
            print(f"{name:<12}{group:<14}{_share(g['declined'], g['unanswerable']):>26}"
                  f"{_share(g['refused'], g['answerable']):>24}{reasons:>34}")
    return 0


def cmd_citations(args, components: Components) -> int:
    from evals.citations import evaluate_citations

    questions = load_questions(args.questions or ABSTENTION_SET)[: args.limit]
    print(json.dumps(evaluate_citations(components, questions), indent=None if args.json else 2))
    return 0


def cmd_answers(args, components: Components) -> int:
    if not components.settings.groq_api_key:
        print("GROQ_API_KEY is not set: the LLM mode was not run. Set it (and optionally GROQ_MODEL) to measure it.")
        return 0
    questions = load_questions(args.questions or ABSTENTION_SET)[: args.limit or 40]
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


def cmd_replicas(args, components: Components) -> int:
    from evals import replicas

    result = replicas.run(**{name: getattr(args, name) for name in replicas.RUN_ARGS})
    return 0 if result["passed"] else 1


def cmd_faults(args, components: Components) -> int:
    from evals import faults

    return faults.main(args)


def cmd_documents(args, components: Components) -> int:
    from evals import doc_benchmark

    print(json.dumps(doc_benchmark.run(args.pages, components=components), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.run_eval", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    retrieval = commands.add_parser("retrieval", help="hit@1, recall@k and MRR per set, split and language")
    retrieval.add_argument("--k", type=int, default=5)
    retrieval.add_argument("--set", action="append", choices=sorted(RETRIEVAL_SETS),
                           help="a set to run (repeatable; default: all)")
    retrieval.add_argument("--sweep", action="store_true", help="compare configurations: what each mechanism is worth")
    retrieval.add_argument("--split", default="dev", choices=("dev", "test", "all"),
                           help="the split --sweep reports (default dev: configurations are chosen there)")
    latency = commands.add_parser("latency", help="retrieval p50/p95, index build and warm start, peak RSS")
    latency.add_argument("--rounds", type=int, default=3)
    latency.add_argument("--set", action="append", choices=sorted(RETRIEVAL_SETS))
    memory = commands.add_parser("memory", help="peak RSS and start-up of `python -m bot ask`: one question, a batch in "
                                                "every language")
    memory.add_argument("--n", type=int, default=300, help="questions in the batch (default 300)")
    memory.add_argument("--rounds", type=int, default=3, help="runs of the one-question and start-up measures")
    memory.add_argument("--set", action="append", choices=sorted(RETRIEVAL_SETS))
    abstention = commands.add_parser("abstention", help="share of unanswerable declined, answerable refused")
    citations = commands.add_parser("citations", help="verbatim and retrieved shares, extractive and adversarial LLM")
    answers = commands.add_parser("answers", help="the LLM mode end to end (needs GROQ_API_KEY)")
    for sub in (retrieval, latency, memory, abstention, citations, answers):
        sub.add_argument("--questions", type=Path, help="a questions file instead of the committed sets")
        sub.add_argument("--limit", type=int, help="only the first N questions of each set")
        sub.add_argument("--json", action="store_true")
    from evals import slack_load

    slack_load.add_arguments(commands.add_parser("slack-load", help="N concurrent signed mentions to the Slack app"))
    from evals import ops_load

    ops_load.add_arguments(commands.add_parser("ops-load", help="N signed mentions over D s to a real bot process"))
    from evals import replicas

    replicas.add_arguments(commands.add_parser("replicas", help="two bot processes on one Postgres and one Chroma "
                                                                "server, signed events spread over both"))
    from evals import faults

    faults.add_arguments(commands.add_parser("faults", help="hostile requests, untrusted URLs, a PDF bomb, an "
                                                            "injection, small faults: probes of the real processes"))
    documents = commands.add_parser("documents", help="index a generated N-page PDF; question latency during "
                                                      "the upload; a PDF bomb")
    documents.add_argument("--pages", type=int, default=200)
    args = parser.parse_args(argv)
    quiet_model_loading()
    components = Components(load_settings())
    handlers = {"retrieval": cmd_retrieval, "latency": cmd_latency, "abstention": cmd_abstention,
                "citations": cmd_citations, "memory": cmd_memory, "answers": cmd_answers, "slack-load": cmd_slack_load,
                "ops-load": cmd_ops_load, "replicas": cmd_replicas, "faults": cmd_faults, "documents": cmd_documents}
    return handlers[args.command](args, components)


if __name__ == "__main__":
    sys.exit(main())
