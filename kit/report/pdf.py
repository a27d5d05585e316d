"""The PDF of a rendered page: WeasyPrint with a URL fetcher that serves data: URIs only (and
records what it refused), or one line naming what to install where WeasyPrint cannot run."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from kit.io.errors import KitError
from kit.shared import stop


def offline_fetcher() -> Any:
    """A WeasyPrint URL fetcher that serves data: URIs only and records every other request."""
    from weasyprint.urls import URLFetcher

    class OfflineFetcher(URLFetcher):
        def __init__(self) -> None:
            super().__init__(allowed_protocols={"data"}, allow_redirects=False)
            self.refused: list[str] = []

        def fetch(self, url: str, headers: Any = None) -> Any:
            if not url.lower().startswith("data:"):
                self.refused.append(url)
                raise ValueError(f"kit report fetches nothing: refused {url[:100]}")
            return super().fetch(url, headers)

    return OfflineFetcher()


PDF_OFF = ("0", "no", "off", "false")


def pdf_wanted() -> bool:
    """False where KIT_PDF is 0 (or no, off, false): the HTML page alone, said by nobody, since
    the user asked for it (a GPU server without Pango; a test that reads no PDF). `kit report
    BUNDLE` makes the PDF later from the same bundle."""
    return os.environ.get("KIT_PDF", "").strip().lower() not in PDF_OFF


class PdfNotWritten(KitError):
    """The HTML page is written; only its PDF is missing, because WeasyPrint (or the Pango library
    it loads) is not installed here. Nothing else is lost: any machine with WeasyPrint makes the
    PDF from the bundle later."""

    def __init__(self, why: str, install: str) -> None:
        super().__init__(f"{why}; {install}")
        self.why, self.install = why, install


def _weasyprint_html() -> Any:
    """WeasyPrint's HTML class, or PdfNotWritten naming what to install."""
    try:
        with stop.held():  # a stop while its C parts load is delivered after (kit.report.mpl)
            from weasyprint import HTML
    except ImportError as exc:
        raise PdfNotWritten(
            f"WeasyPrint is not installed here ({exc})", "pip install weasyprint"
        ) from None
    except OSError as exc:  # its system libraries (Pango) are missing or broken
        raise PdfNotWritten(
            f"WeasyPrint cannot load its system libraries ({exc})",
            "apt-get install libpango-1.0-0 libpangoft2-1.0-0",
        ) from None
    return HTML


def write_pdf(html: str, out: Path | io.BytesIO, fetcher: Any = None) -> Any:
    """The PDF from the same HTML and stylesheet. Returns the fetcher (its `refused` list).

    Raises PdfNotWritten where WeasyPrint cannot run here."""
    import logging

    html_class = _weasyprint_html()
    fetcher = fetcher or offline_fetcher()
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    html_class(string=html, base_url=None, url_fetcher=fetcher).write_pdf(out)
    return fetcher
