"""The citable unit of the Regulation, as the corpus stores it: owned here, the lowest layer."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Provision:
    """One citable unit of the Regulation: an article paragraph with its points inlined,
    a whole article without numbered paragraphs, or one Art. 4 definition."""

    id: str  # "Art. 33(1)", "Art. 4(7)", "Art. 10"
    article: int
    paragraph: str | None
    lang: str  # ISO 639-1, lowercase
    title: str
    chapter: str
    section: str | None
    text: str
    url: str
    points: tuple[str, ...] = ()  # the printed labels of its points, in order: "(a)", "α)", "б)"

    def __post_init__(self):
        # JSON gives a list; a frozen record holds a tuple.
        object.__setattr__(self, "points", tuple(self.points))

    @property
    def headed_text(self) -> str:
        """Its heading and its text: what word search reads, since the heading ("Right to erasure") is part of
        what a provision is about."""
        return f"{self.title}. {self.text}"
