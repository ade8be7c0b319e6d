"""The King James Bible as a corpus of long documents: 66 books of public-domain English prose (about 790,000 words)
that installs without a Hub download, from Debian's `bible-kjv` package (`apt-get install bible-kjv`: the `bible`
reader and its compressed text, package `bible-kjv-text`).

The text is the 1611 translation (Authorized Version), in the public domain in most of the world; in the United Kingdom
the Crown's letters patent still cover it. The Debian package is "public domain" in its copyright file.

One book is one document (Obadiah, 670 words, to Psalms, 43,000), its chapters' verses joined into lines of prose with
the verse numbers and chapter headings left out. The split is by book and never shares one: every 11th book from the
6th is held out for test and every 11th from the 11th for validation (6 books each, 54 for training), spread over
the Old and New Testaments so both kinds of prose are in every split.
"""

import shutil
import subprocess

# names the `bible` program accepts, in canonical order (`book_title` gives the title it prints)
BOOKS = (
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth", "1Samuel", "2Samuel",
    "1Kings", "2Kings", "1Chronicles", "2Chronicles", "Ezra", "Nehemiah", "Esther", "Job", "Psalms", "Proverbs",
    "Ecclesiastes", "Song", "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel",
    "Amos", "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah", "Malachi",
    "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1Corinthians", "2Corinthians", "Galatians", "Ephesians",
    "Philippians", "Colossians", "1Thessalonians", "2Thessalonians", "1Timothy", "2Timothy", "Titus", "Philemon",
    "Hebrews", "James", "1Peter", "2Peter", "1John", "2John", "3John", "Jude", "Revelation",
)


def book_title(book: str) -> str:
    """The title the `bible` program prints for a name of `BOOKS` ("1Samuel" -> "1 Samuel")."""
    if book == "Song":
        return "Song of Solomon"
    return f"{book[0]} {book[1:]}" if book[0].isdigit() else book


def kjv_split(index: int) -> str:
    """The split of the book at `index` (0-based, canonical order)."""
    if index % 11 == 5:
        return "test"
    if index % 11 == 10:
        return "validation"
    return "train"


def parse_bible_output(output: str, book: str) -> str:
    """A book's text from the `bible -l0` listing: lines "<Book> <chapter>" start chapters, lines "  <n> <verse>"
    are verses. Returns the verses without their numbers, one chapter per line."""
    title = book_title(book)
    chapters, verses = [], []
    for line in output.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(title + " ") and stripped[len(title) + 1:].isdigit():
            if verses:
                chapters.append(" ".join(verses))
            verses = []
            continue
        number, _, verse = stripped.partition(" ")
        if not number.isdigit() or not verse:
            raise ValueError(f"Unexpected line in the listing of {book}: {line!r}")
        verses.append(verse)
    if verses:
        chapters.append(" ".join(verses))
    if not chapters:
        raise ValueError(f"The bible program printed no verse of {book}")
    return "\n".join(chapters) + "\n"


def kjv_books(program: str = "bible") -> list[dict]:
    """Every book as `{"name": "<NN>-<Book>", "text": ..., "split": ...}`, read with the `bible` program."""
    if shutil.which(program) is None:
        raise FileNotFoundError(f"The King James Bible corpus needs the `{program}` program: apt-get install bible-kjv")
    books = []
    for index, book in enumerate(BOOKS):
        listing = subprocess.run([program, "-l0", f"{book}1:1-999:999"], capture_output=True, text=True, check=True)
        first = next((line.strip() for line in listing.stdout.splitlines() if line.strip()), "")
        if first != f"{book_title(book)} 1":
            raise ValueError(f"The bible program answered {first!r} for {book!r}")
        books.append({"name": f"{index + 1:02d}-{book}", "text": parse_bible_output(listing.stdout, book),
                      "split": kjv_split(index)})
    return books


__all__ = ["BOOKS", "book_title", "kjv_books", "kjv_split", "parse_bible_output"]
