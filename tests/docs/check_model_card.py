#!/usr/bin/env python3
"""docs/model-card.md's worked figures for fashion_mlp equal the committed card.

  check_model_card.py docs/model-card.md generated/fashion_mlp/fashion_mlp.json
"""
import json
import re
import sys


def main():
    doc, card_path = sys.argv[1], sys.argv[2]
    text = open(doc, encoding="utf-8").read()
    card = json.load(open(card_path, encoding="utf-8"))
    m = re.search(r"For `fashion_mlp` \(float32, max batch (\d+)\): (\d+) params \((\d+) bytes\); arenas (\d+)\s+"
                  r"bytes \(training state[^)]*\) and (\d+) bytes \(inference state\); (\d+)\s+flops per example for\s+"
                  r"`forward`, (\d+) for `train_step`", text)
    if not m:
        print(f"{doc}: the fashion_mlp paragraph is missing or reworded")
        return 1
    want = [card["max_batch"], card["parameter_count"], card["parameter_bytes"],
            card["arena_bytes"]["training_state"], card["arena_bytes"]["inference_state"],
            card["flops_per_example"]["forward"], card["flops_per_example"]["train_step"]]
    names = ["max batch", "params", "param bytes", "training arena", "inference arena", "forward flops",
             "train_step flops"]
    bad = [f"{n}: the page says {g}, the card {int(w)}" for n, g, w in zip(names, m.groups(), want) if int(g) != int(w)]
    for b in bad:
        print(f"{doc}: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
