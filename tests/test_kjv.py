"""The King James Bible corpus (lengthgen.data.kjv): the `bible` program's listing parsed into books, split by book."""

import shutil

import pytest

from lengthgen.data.kjv import BOOKS, book_title, kjv_books, kjv_split, parse_bible_output

LISTING = """
1 John 1

  1 That which was from the beginning, which we have heard,
  2 (For the life was manifested, and we have seen it,)

1 John 2

  1 My little children, these things write I unto you.
"""


def test_a_listing_becomes_one_line_of_prose_per_chapter():
    assert book_title("1John") == "1 John" and book_title("Song") == "Song of Solomon"
    assert parse_bible_output(LISTING, "1John") == (
        "That which was from the beginning, which we have heard, (For the life was manifested, and we have seen it,)\n"
        "My little children, these things write I unto you.\n"
    )
    with pytest.raises(ValueError, match="Unexpected line in the listing of 1John: 'Jude 1'"):
        parse_bible_output(LISTING + "Jude 1\n", "1John")


def test_the_split_is_by_book_with_both_testaments_held_out():
    splits = [kjv_split(i) for i in range(len(BOOKS))]
    assert len(BOOKS) == 66 and splits.count("train") == 54
    held_out = [BOOKS[i] for i, s in enumerate(splits) if s == "test"]
    assert held_out == ["Joshua", "Esther", "Hosea", "Malachi", "Philippians", "2Peter"]


@pytest.mark.skipif(shutil.which("bible") is None, reason="needs Debian's bible-kjv package (.ci/run installs it)")
def test_every_book_is_read_from_the_installed_package():
    books = kjv_books()
    assert [b["name"] for b in books][:2] == ["01-Genesis", "02-Exodus"] and len(books) == 66
    assert books[0]["text"].startswith("In the beginning God created the heaven and the earth. And the earth was")
    assert books[0]["text"].count("\n") == 50  # 50 chapters
    assert books[-1]["text"].rstrip().endswith("The grace of our Lord Jesus Christ be with you all. Amen.")
    assert 780_000 < sum(len(b["text"].split()) for b in books) < 800_000
