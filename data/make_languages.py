"""Builds `languages.tsv`: 2,000 words of each of six languages from Debian's word lists.

Run from this folder on a Debian 12 (bookworm) machine: it downloads the packages with
`apt-get download`, unpacks them and writes `languages.tsv` and `languages.LICENSE`; the same
packages give the same files. English comes from `words.txt` (Debian's `wamerican`, already
here).

A word is kept if it is lowercase letters only (no capital, digit, apostrophe or hyphen), 3 to
12 letters long, and in no other language's list; of those, the 2,000 whose SHA-256 is
smallest are taken, so the choice depends on the words alone. Rows are sorted by language,
then word.
"""

import hashlib
import pathlib
import subprocess
import tempfile

PACKAGES = {
    "french": ("wfrench", "french"),
    "german": ("wngerman", "ngerman"),
    "italian": ("witalian", "italian"),
    "spanish": ("wspanish", "spanish"),
    "dutch": ("wdutch", "dutch"),
}
PER_LANGUAGE = 2000
MIN_LEN, MAX_LEN = 3, 12


def keep(word):
    return MIN_LEN <= len(word) <= MAX_LEN and word.isalpha() and word == word.lower()


def unpack(tmp):
    """The word list and the copyright file of each package, with its version."""
    names = [p for p, _ in PACKAGES.values()]
    subprocess.run(["apt-get", "download", *names], cwd=tmp, check=True)
    out = {}
    for language, (package, dict_name) in PACKAGES.items():
        deb = next(pathlib.Path(tmp).glob(f"{package}_*.deb"))
        root = pathlib.Path(tmp) / package
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        words = (root / "usr/share/dict" / dict_name).read_text("utf-8").split("\n")
        notice = (root / "usr/share/doc" / package / "copyright").read_text("utf-8")
        version = deb.name.split("_")[1].replace("%3a", ":")
        out[language] = (words, package, version, notice)
    return out


def main():
    here = pathlib.Path(__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        lists = unpack(tmp)
    lists["english"] = ((here / "words.txt").read_text("utf-8").split("\n"), None, None, None)
    kept = {lang: {w for w in words if keep(w)} for lang, (words, *_) in lists.items()}
    rows = []
    for lang, words in sorted(kept.items()):
        others = set().union(*(w for l, w in kept.items() if l != lang))
        unique = sorted(words - others, key=lambda w: hashlib.sha256(w.encode()).digest())
        rows += [(lang, w) for w in sorted(unique[:PER_LANGUAGE])]
    with open(here / "languages.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("language\tword\n")
        f.writelines(f"{lang}\t{word}\n" for lang, word in rows)
    with open(here / "languages.LICENSE", "w", encoding="utf-8", newline="\n") as f:
        f.write(
            "languages.tsv holds words of the Debian packages below (english: see words.LICENSE).\n"
            "Each package's copyright file follows, unchanged.\n"
        )
        for lang, (_, package, version, notice) in sorted(lists.items()):
            if package:
                f.write(f"\n==== {lang}: Debian package {package} {version} ====\n\n{notice}")


if __name__ == "__main__":
    main()
