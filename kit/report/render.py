"""Render a bundle into report.html (one self-contained file) and report.pdf (WeasyPrint).

The renderer reads only the bundle's own files and fetches nothing: the stylesheet and the plots
are inlined, Jinja2 escapes every string from the bundle, and WeasyPrint gets a URL fetcher that
refuses everything but data: URIs (and records what it refused). A failed or missing run shows
as failed, never as a number.
"""

from __future__ import annotations

import base64
import platform
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from kit import __version__
from kit.bundle import MANIFEST, Bundle, sha256_file
from kit.errors import KitError
from kit.report import analysis, plots

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STYLE = HERE / "style.css"


# --- formatting ----------------------------------------------------------------------------


fmt_num = plots.fmt_num


def display(value: float | None, unit: str) -> tuple[str, str]:
    """(number, unit) for a table: fractions as percent."""
    if value is None:
        return "-", unit
    if unit == "fraction":
        return f"{value * 100:.1f}", "%"
    return fmt_num(value), unit


def when(iso: Any) -> str:
    """ "2026-11-20T12:00:05+00:00" -> "2026-11-20 12:00:05 UTC"; anything else as it is."""
    s = str(iso or "")
    if len(s) >= 19 and s[10] == "T":
        zone = s[19:]
        return f"{s[:10]} {s[11:19]}" + (" UTC" if zone in ("+00:00", "Z") else f" {zone}")
    return s or "-"


def human_bytes(n: Any) -> str:
    return plots.human_bytes(float(n)) if isinstance(n, (int, float)) else str(n)


def jinja_env() -> Environment:
    """The templates, autoescaping on, with the number and size filters both documents use."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = fmt_num
    env.filters["bytes"] = human_bytes
    env.filters["pct"] = lambda x: "-" if x is None else f"{x * 100:.1f}%"
    env.globals["display"] = display
    env.filters["when"] = when
    return env


# --- sections ------------------------------------------------------------------------------


def machine_line(hardware: dict[str, Any], results: dict[str, Any]) -> str:
    """The machine in one line: the inventory's summary_line for a full inventory."""
    from kit.inventory import summary_line

    if hardware.get("gpus") is not None and "topology" in hardware:
        return summary_line(hardware)
    if hardware.get("summary"):
        return str(hardware["summary"])
    gpus = hardware.get("gpus") or []
    host = hardware.get("host") or {}
    if gpus:
        names: dict[str, int] = {}
        for g in gpus:
            names[g.get("name") or "GPU"] = names.get(g.get("name") or "GPU", 0) + 1
        return ", ".join(f"{n}x {name}" for name, n in names.items())
    cores = host.get("logical_cpus") or host.get("cpu_count")
    system = str(host.get("os") or "").split("-with-")[0]
    parts = [f"{cores} CPUs" if cores else None, host.get("cpu_model"), system or None]
    return "No GPU: " + ", ".join(p for p in parts if p) if any(parts) else "No GPU recorded"


def hardware_view(hw: dict[str, Any]) -> dict[str, Any]:
    """What the Hardware section shows; every field optional (a CPU-only bundle has few)."""
    host = hw.get("host") or {}
    gpus = hw.get("gpus") or []
    rows = []
    for g in gpus:
        pcie = g.get("pcie") or {}
        links = [n for n in g.get("nvlinks") or [] if n.get("active")]
        remotes: dict[str, int] = {}
        for n in links:
            remotes[str(n.get("remote"))] = remotes.get(str(n.get("remote")), 0) + 1
        speed = next((n.get("speed_gbs") for n in links if n.get("speed_gbs")), None)
        version = next((n.get("version") for n in links if n.get("version")), None)
        nvlink = "none"
        if links:
            nvlink = f"{len(links)} active" + (f", NVLink {version}" if version else "")
            nvlink += f", {speed:g} GB/s each" if speed else ""
            nvlink += " to " + ", ".join(f"{k} ({v})" for k, v in remotes.items())
        gen = (
            f"Gen{pcie.get('gen_current')} x{pcie.get('width_current')}"
            if pcie.get("gen_current")
            else "-"
        )
        gen_max = (
            f"Gen{pcie.get('gen_max')} x{pcie.get('width_max')}" if pcie.get("gen_max") else "-"
        )
        rows.append(
            {
                "index": g.get("index"),
                "name": g.get("name"),
                "memory": f"{g['memory_total_gib']:g} GiB" if g.get("memory_total_gib") else "-",
                "cc": g.get("compute_capability") or "-",
                "pcie": gen,
                "pcie_max": gen_max,
                "numa": g.get("numa_node") if g.get("numa_node") is not None else "-",
                "cpus": g.get("cpu_affinity") or "-",
                "nvlink": nvlink,
                "power": f"{g['power_limit_w']:g} W" if g.get("power_limit_w") else "-",
                "clocks": (g.get("clocks_max_mhz") or {}).get("sm"),
                "bus": g.get("pci_bus_id") or "-",
                "vbios": g.get("vbios_version") or "-",
                "persistence": g.get("persistence_mode"),
            }
        )
    gpus_of = {}
    for g in rows:
        gpus_of.setdefault(g["numa"], []).append(f"GPU{g['index']}")
    numa = [
        {
            "id": n.get("id"),
            "cpus": n.get("cpus") or "-",
            "mem": human_bytes(n["mem_total_bytes"]) if n.get("mem_total_bytes") else "-",
            "gpus": ", ".join(gpus_of.get(n.get("id"), [])) or "-",
        }
        for n in host.get("numa_nodes") or []
    ]
    container = host.get("container") or {}
    topo = hw.get("topology") or {}
    peer = hw.get("peer_access") or {}
    return {
        "gpus": rows,
        "driver": hw.get("driver") or {},
        "nvml_error": hw.get("nvml_error"),
        "topology": topo if topo.get("matrix") and len(topo.get("matrix")) > 1 else None,
        "p2p_status": (hw.get("nvml_p2p_status") or {}).get("read"),
        "peer_access": peer if peer.get("matrix") else None,
        "peer_access_note": hw.get("peer_access_note"),
        "labels": topo.get("labels") or [f"GPU{g.get('index')}" for g in gpus],
        "host": [
            (k, v)
            for k, v in (
                ("CPU", host.get("cpu_model")),
                ("sockets", host.get("sockets")),
                ("physical cores", host.get("physical_cores")),
                ("logical CPUs", host.get("logical_cpus") or host.get("cpu_count")),
                ("CPUs this process may use", host.get("allowed_cpus")),
                (
                    "memory",
                    human_bytes(host["mem_total_bytes"]) if host.get("mem_total_bytes") else None,
                ),
                ("/dev/shm", human_bytes(host["shm_bytes"]) if host.get("shm_bytes") else None),
                ("OS", host.get("os")),
                ("kernel", host.get("kernel")),
                ("architecture", host.get("arch")),
                ("hostname", host.get("hostname")),
                (
                    "inventory taken in a container",
                    (container.get("runtime") or "yes")
                    if container.get("detected")
                    else ("no" if container else None),
                ),
                ("collected at", hw.get("collected_at")),
            )
            if v not in (None, "")
        ],
        "numa": numa,
    }


def _speed(mbps: Any) -> str:
    if not isinstance(mbps, int):
        return "speed unknown"
    return f"{mbps / 1000:g} Gb/s" if mbps >= 1000 else f"{mbps} Mb/s"


def nodes_view(hw: dict[str, Any], results: dict[str, Any]) -> dict[str, Any] | None:
    """Multi-node bundles: each node (daemon, name, GPUs, network) and how the nodes talked."""
    nodes = hw.get("nodes")
    if not nodes:
        return None
    rows = []
    for n in nodes:
        gpus = n.get("gpus") or []
        names = sorted({str(g.get("name")) for g in gpus})
        links = [
            f"{i.get('name')} {i.get('address') or ''} {_speed(i.get('speed_mbps'))}"
            f" MTU {i.get('mtu') or '?'} ({i.get('state') or '?'})".replace("  ", " ")
            for i in n.get("interfaces") or []
            if i.get("kind") != "bridge" and (i.get("address") or i.get("state") == "up")
        ]
        links += [
            f"{p.get('device')} port {p.get('port')}: {p.get('rate') or '?'}"
            f" ({p.get('state') or '?'}, {p.get('link_layer') or '?'})"
            for p in n.get("infiniband") or []
        ]
        rows.append(
            {
                "node": n.get("node"),
                "host": n.get("host") or "-",
                "hostname": n.get("hostname") or "-",
                "gpus": f"{len(gpus)} x {', '.join(names)}" if gpus else "none",
                "cpus": n.get("cpus") or "-",
                "memory": human_bytes(n["mem_total_bytes"]) if n.get("mem_total_bytes") else "-",
                "network": links or ["no interface recorded"],
            }
        )
    transports: dict[str, list[str]] = {}
    for r in results.get("runs") or []:
        used = (r.get("network") or {}).get("transport") or []
        if used:
            transports.setdefault(r.get("variant") or "?", [])
            transports[r.get("variant") or "?"] += [t for t in used if t not in transports[r.get("variant") or "?"]]  # fmt: skip
    return {"rows": rows, "transports": transports}


def environment_view(env: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    container = env.get("container") or {}
    packages = container.get("packages") if isinstance(container, dict) else None
    versions = (
        [(k, v) for k, v in container.items() if k != "packages" and v not in (None, "")]
        if isinstance(container, dict)
        else []
    )
    fingerprint = [(k, v) for k, v in env.items() if k != "container" and v not in (None, "")]
    runtime = env.get("runtime") or results.get("runtime")
    # versions seen by the runs themselves: they must agree with each other
    seen: dict[str, set[str]] = {}
    for r in results.get("runs") or []:
        for k, v in (r.get("versions") or {}).items():
            if v is not None:
                seen.setdefault(k, set()).add(str(v))
    disagree = {k: sorted(v) for k, v in seen.items() if len(v) > 1}
    return {
        "fingerprint": fingerprint,
        "versions": versions,
        "packages": sorted((packages or {}).items()),
        "in_container": runtime == "docker",
        "runtime": runtime,
        "pinned": bool(env.get("pinned", results.get("pinned"))),
        "disagree": disagree,
    }


def manifest_view(root: Path) -> list[tuple[str, str, int]]:
    """(path, sha256, bytes) of every bundle file the report does not itself produce."""
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or rel == MANIFEST or rel.startswith("report.") or rel.endswith(".tmp"):
            continue
        out.append((rel, sha256_file(p), p.stat().st_size))
    return out


# --- figures -------------------------------------------------------------------------------


@dataclass
class Figure:
    key: str
    caption: str
    svg: str

    @property
    def uri(self) -> str:
        """The SVG as a data: URI: WeasyPrint draws it as one image, much faster than inline."""
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg.encode()).decode()


@dataclass
class BenchView:
    bench: analysis.Benchmark
    figures: list[Figure] = field(default_factory=list)
    curves: dict[str, Any] | None = None
    traces: int = 0
    telemetry: int = 0
    raw: dict[str, Any] | None = None
    index: int = 0


def _bar_rows(bench: analysis.Benchmark, metric: str) -> list[dict[str, Any]]:
    rows = []
    for v in bench.variants:
        row = (bench.metrics.get(metric) or {}).get(v.name)
        s = row.summary if row else None
        rows.append(
            {
                "variant": v.name,
                "median": s.median if s else None,
                "low": s.ci_low if s else None,
                "high": s.ci_high if s else None,
            }
        )
    return rows


def raw_sizes(bench: analysis.Benchmark) -> dict[str, Any] | None:
    """busbw of every finished all-reduce run per size (median of its trials), for the appendix."""
    ok = [r for r in bench.runs if analysis.is_ok(r) and (r.get("data") or {}).get("sizes")]
    if not ok:
        return None
    sizes = sorted({int(row["bytes"]) for r in ok for row in r["data"]["sizes"]})
    cells = []
    for size in sizes:
        line = []
        for r in ok:
            row = next((x for x in r["data"]["sizes"] if int(x["bytes"]) == size), None)
            line.append(statistics.median(row["busbw_gbps"]) if row else None)
        cells.append((size, line))
    return {"columns": [f"{r['variant']} r{r.get('repeat', '?')}" for r in ok], "rows": cells}


def bench_view(bench: analysis.Benchmark, index: int) -> BenchView:
    view = BenchView(bench, index=index + 1)
    salt = f"{index}-{bench.name}"
    if bench.kind == "allreduce":
        view.curves = analysis.allreduce_curves(bench)
        view.raw = raw_sizes(bench)
        if view.curves["sizes"]:
            svg = plots.allreduce_busbw(
                view.curves, f"{bench.label}: bus bandwidth", f"{salt}-busbw"
            )
            if svg:
                view.figures.append(
                    Figure(
                        "busbw",
                        f"{bench.label}: bus bandwidth against "
                        "message size (line: median over repeats; band: min to max of the repeats)",
                        svg,
                    )
                )
            svg = plots.allreduce_time(
                view.curves, f"{bench.label}: time per operation", f"{salt}-time"
            )
            if svg:
                view.figures.append(
                    Figure(
                        "time",
                        f"{bench.label}: time per all-reduce against message size, log-log",
                        svg,
                    )
                )
    else:
        metric = analysis.verdict_metric(bench)
        rows = next(iter((bench.metrics.get(metric) or {}).values()), None)
        if rows is not None:
            unit = rows.unit
            svg = plots.metric_bars(
                _bar_rows(bench, metric),
                f"{rows.label} ({unit})",
                f"{bench.label}: {rows.label}",
                f"{salt}-bars",
            )
            if svg:
                view.figures.append(
                    Figure(
                        "bars",
                        f"{bench.label}: {rows.label}, median with its 95% bootstrap interval",
                        svg,
                    )
                )
        traces = analysis.step_traces(bench)
        view.traces = len(traces)
        svg = plots.step_traces(
            traces, f"{bench.label}: every step of every repeat", f"{salt}-steps"
        )
        if svg:
            view.figures.append(
                Figure(
                    "steps",
                    f"{bench.label}: step times of every repeat; "
                    "the shaded warm-up steps are not measured",
                    svg,
                )
            )
    series = analysis.telemetry_series(bench)
    view.telemetry = len(series)
    svg = plots.telemetry(series, f"{bench.label}: GPU telemetry", f"{salt}-telemetry")
    if svg:
        view.figures.append(
            Figure(
                "telemetry",
                f"{bench.label}: NVML telemetry during every finished run, every GPU",
                svg,
            )
        )
    return view


# --- method --------------------------------------------------------------------------------


def method_view(benches: list[analysis.Benchmark], results: dict[str, Any]) -> dict[str, Any]:
    """Facts the Method section states, read from the runs (never assumed)."""
    out: dict[str, Any] = {"allreduce": [], "training": []}
    for b in benches:
        ok = [r for v in b.variants for r in v.ok]
        data = (ok[0].get("data") or {}) if ok else {}
        params = data.get("params") or b.params
        if b.kind == "allreduce":
            timing = sorted(
                {
                    row.get("timing")
                    for r in ok
                    for row in (r.get("data") or {}).get("sizes") or []
                    if row.get("timing")
                }
            )
            out["allreduce"].append(
                {
                    "label": b.label,
                    "params": params,
                    "timing": timing,
                    "world": sorted({r.get("world_size") for r in ok if r.get("world_size")}),
                    "bus_factor": data.get("bus_factor"),
                    "backend": sorted({r.get("backend") for r in ok if r.get("backend")}),
                }
            )
        else:
            out["training"].append(
                {
                    "label": b.label,
                    "params": params,
                    "warmup": sorted(
                        {(r.get("data") or {}).get("warmup_steps") for r in ok} - {None}
                    ),
                    "steps": sorted(
                        {len((r.get("data") or {}).get("step_times_s") or []) for r in ok} - {0}
                    ),
                    "flops_formula": data.get("flops_formula"),
                    "weights": data.get("weights"),
                    "data": data.get("data"),
                }
            )
    out["repeats"] = results.get("repeats")
    out["cv"] = analysis.CV_THRESHOLD
    out["drift"] = analysis.DRIFT_THRESHOLD
    return out


# --- rendering -----------------------------------------------------------------------------


def context(bundle: Bundle) -> dict[str, Any]:
    results = bundle.results
    try:
        recipe = bundle.recipe or {}
    except Exception:  # a missing or broken recipe.yaml must not stop the report
        recipe = {}
    if not isinstance(recipe, dict):
        recipe = {}
    hardware = bundle.read_json("hardware.json") or {}
    environment = bundle.read_json("environment.json") or {}
    benches = analysis.build_benchmarks(results, recipe)
    views = [bench_view(b, i) for i, b in enumerate(benches)]
    n = 0
    for v in views:
        for f in v.figures:
            n += 1
            f.caption = f"Figure {n}. {f.caption}"
    return {
        "results": results,
        "recipe": recipe,
        "bundle_name": bundle.path.name,
        "machine": machine_line(hardware, results),
        "benches": views,
        "headlines": {b.name: analysis.headline(b) for b in benches},
        # reference figures are for full-size runs on GPUs: a smoke run is not compared with them
        "expectations": {
            b.name: [] if results.get("smoke") else analysis.expectations(b) for b in benches
        },
        "transports": {b.name: analysis.transports(b) for b in benches},
        "findings": analysis.findings(results, benches),
        "hardware": hardware_view(hardware),
        "has_hardware": bool(hardware),
        "nodes": nodes_view(hardware, results),
        "environment": environment_view(environment, results),
        "method": method_view(benches, results),
        "manifest": manifest_view(bundle.path),
        "runs": results.get("runs") or [],
        "kit_version": __version__,
        "renderer": f"kit {__version__}, Python {platform.python_version()}",
        "style": STYLE.read_text(),
    }


def render_html(bundle: Bundle, ctx: dict[str, Any] | None = None, pdf: bool = False) -> str:
    """The page. pdf=True: the same page with each figure as a data: URI image (for WeasyPrint)."""
    ctx = ctx if ctx is not None else context(bundle)
    return jinja_env().get_template("report.html.j2").render(**ctx, pdf=pdf)


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


def write_pdf(html: str, out: Path, fetcher: Any = None) -> Any:
    """The PDF from the same HTML and stylesheet. Returns the fetcher (its `refused` list).

    Raises PdfNotWritten where WeasyPrint cannot run here."""
    import logging

    html_class = _weasyprint_html()
    fetcher = fetcher or offline_fetcher()
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    html_class(string=html, base_url=None, url_fetcher=fetcher).write_pdf(out)
    return fetcher


def render_bundle(bundle: Bundle) -> Path:
    """Write report.html and report.pdf into the bundle; returns the HTML's path.

    Raises PdfNotWritten (after report.html is written) where WeasyPrint cannot run here."""
    ctx = context(bundle)
    out = bundle.path / "report.html"
    out.write_text(render_html(bundle, ctx), encoding="utf-8")
    try:
        write_pdf(render_html(bundle, ctx, pdf=True), bundle.path / "report.pdf")
    except PdfNotWritten as exc:
        raise PdfNotWritten(
            f"report.html written, report.pdf not: {exc.why}",
            f"for the PDF, run `kit report {bundle.path}` where WeasyPrint works ({exc.install})",
        ) from None
    return out
