#!/usr/bin/env python3
"""Make a small real-text corpus and a GPT-2-format BPE tokenizer trained on it, offline.

The text is every docstring of the running Python's standard library (English prose, a few
MB), one JSON document per docstring: the `{"text": ...}` lines tools/preprocess_data.py
reads. The tokenizer is a byte-level BPE trained with Hugging Face `tokenizers` and saved as
`vocab.json` + `merges.txt`, which is what Megatron's GPT2BPETokenizer loads. Nothing is
downloaded.

    python3 bench/make_corpus.py --out DIR [--vocab-size 8192] [--repeat 1]
"""
import argparse
import inspect
import json
import os
import pkgutil
import sys
import warnings


def docstrings():
    seen = set()
    names = sorted(m.name for m in pkgutil.iter_modules() if m.module_finder.path.startswith(sys.base_prefix))
    for name in names + list(sys.builtin_module_names):
        if name.startswith(("_", "test", "idlelib", "tkinter", "turtle", "antigravity", "this")):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = __import__(name)
        except BaseException:  # noqa: BLE001 - some modules exit or need a display; skip them
            continue
        for obj in [module] + [v for dummy, v in inspect.getmembers(module) if inspect.isclass(v) or inspect.isfunction(v)]:
            doc = inspect.getdoc(obj)
            if doc and len(doc) > 80 and doc not in seen:
                seen.add(doc)
                yield doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=1, help="write the corpus N times (a larger .bin)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    docs = list(docstrings())
    corpus = os.path.join(args.out, "corpus.jsonl")
    with open(corpus, "w", encoding="utf-8") as handle:
        for dummy in range(args.repeat):
            for doc in docs:
                handle.write(json.dumps({"text": doc}) + "\n")
    from tokenizers import ByteLevelBPETokenizer  # imported late: the corpus part needs nothing

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(docs, vocab_size=args.vocab_size, min_frequency=2,
                                  special_tokens=["<|endoftext|>"])
    tokenizer.save_model(args.out)  # writes vocab.json and merges.txt
    print(json.dumps({"documents": len(docs) * args.repeat, "bytes": os.path.getsize(corpus),
                      "vocab_size": tokenizer.get_vocab_size(), "out": args.out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
