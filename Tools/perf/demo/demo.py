"""A small program for "make demo": nested Python functions doing real work.

Run it under perf with perf trampolines active, and the profile names
tokenize, count_words, word_frequencies and main instead of showing only
_PyEval_EvalFrameDefault.
"""

import time


def tokenize(text):
    words = []
    word = []
    for ch in text:
        if ch.isalpha():
            word.append(ch.lower())
        elif word:
            words.append("".join(word))
            word = []
    if word:
        words.append("".join(word))
    return words


def count_words(words):
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return counts


def word_frequencies(text):
    return count_words(tokenize(text))


def fibonacci(n):
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)


def main(seconds=2.0):
    text = "The quick brown fox jumps over the lazy dog; " * 2000
    deadline = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < deadline:
        freqs = word_frequencies(text)
        fibonacci(18)
        rounds += 1
    top = sorted(freqs.items(), key=lambda kv: -kv[1])[:3]
    print(f"{rounds} rounds; most frequent words: {top}")


if __name__ == "__main__":
    main()
