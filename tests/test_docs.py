"""The documentation stays true: the variable reference is generated, the examples run, the site
builds without a warning, renders what its sources mean (lists, code, diagrams, cross-references),
and its API reference shows exactly each module's ``__all__``, every name with a docstring."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import slurm_resolver
from slurm_resolver import placement
from slurm_resolver.variables import VARIABLES, reference_markdown

from .browser import Chromium
from .conftest import ROOT

DOCS = ROOT / "docs"
EXAMPLES = sorted((DOCS / "resolvers").glob("*.md"))
REFERENCE = sorted(p.stem for p in DOCS.glob("reference*.md"))
RAW_ROLE = re.compile(r":(?:py:)?(?:meth|func|class|data|mod|attr|exc|obj|const|ref|doc|term):(?:<code>|`)")
"""A reStructuredText role that Markdown left as text (:meth:`x` renders as :meth:<code>x</code>)."""

def modules() -> list[str]:
    """Every module of the package, the rpc package's included (not the generated protocol buffers)."""
    found = pkgutil.walk_packages(slurm_resolver.__path__, "slurm_resolver.")
    return ["slurm_resolver", *sorted(m.name for m in found if not m.name.endswith(("_pb2", "__main__")))]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with warnings as errors (an unresolved cross-reference is one)."""
    out = tmp_path_factory.mktemp("site")
    plain = {name: value for name, value in os.environ.items() if name != "NO_MKDOCS_2_WARNING"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=plain)
    assert built.returncode == 0, built.stderr
    assert "end of life" not in built.stderr, "mkdocs.yml quiets the theme's notice: see its extra:"
    return out


def pages(site: Path) -> dict[str, str]:
    return {str(p.relative_to(site)): p.read_text() for p in sorted(site.rglob("*.html"))}


def documented(site: Path) -> set[str]:
    """The ids of every object the API reference documents."""
    return {anchor for page in REFERENCE
            for anchor in re.findall(r'<h\d id="(slurm_resolver(?:\.\w+)+)"', (site / f"{page}.html").read_text())}


def test_variable_reference_is_generated_from_the_table() -> None:
    page = (DOCS / "variables.md").read_text()
    assert page.endswith(reference_markdown()), "regenerate: slurm-resolver variables"


def test_every_variable_read_is_in_the_table() -> None:
    names = {v.name for v in VARIABLES}
    source = "\n".join(p.read_text() for p in (ROOT / "slurm_resolver").rglob("*.py"))
    read = set(re.findall(r'"((?:SLURM|SLURMD|OMPI|PMI|PMIX|MPI|CUDA|GPU|TF)_[A-Z_]+)"', source))
    generic = {n.split("_<")[0] for n in names}
    missing = sorted(r for r in read if r not in names and not any(r.startswith(g) for g in generic)
                     and r not in {"OMPI_COMM_WORLD_", "SLURMD_", "SLURM_"})
    assert not missing, f"add to slurm_resolver/variables.py: {missing}"


@pytest.mark.parametrize("page", EXAMPLES, ids=lambda p: p.name)
def test_examples_run(page: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    runnable = [b for b in blocks if "=" in b and not b.lstrip().startswith(("SlurmClusterResolver(",))]
    assert runnable, f"{page.name} has no runnable example"
    for block in runnable:
        exec(compile(block, str(page), "exec"), {})


def test_site_builds_with_warnings_as_errors(site: Path) -> None:
    assert (site / "bootstrap.html").is_file() and (site / "protocol.html").is_file()
    assert (site / "search" / "search_index.json").is_file()  # the theme's search
    assert (site / "javascripts" / "mermaid.min.js").is_file()  # vendored: no CDN


def test_no_raw_restructuredtext_role_is_left_in_the_html(site: Path) -> None:
    found = set()
    for name, html in pages(site).items():
        for role in RAW_ROLE.finditer(html):
            owners = re.findall(r'<h\d id="(slurm_resolver[\w.]*)"', html[:role.start()])
            found.add(owners[-1] if owners else f"{name}: {html[role.start():role.start() + 60]}")
    assert found == set(), "write [text][slurm_resolver.module.name] or `name` in docstrings"


def test_the_api_reference_shows_exactly_each_modules_all(site: Path) -> None:
    ids = documented(site)
    undocumented, not_exported = set(), set()
    for name in modules():
        module = importlib.import_module(name)
        for export in getattr(module, "__all__", ()):
            obj = getattr(module, export)
            canonical = f"{getattr(obj, '__module__', name)}.{getattr(obj, '__qualname__', export)}"
            if export != "__version__" and not {f"{name}.{export}", canonical} & ids:
                undocumented.add(f"{name}.{export}")
    for anchor in ids - set(modules()):
        parent, _, leaf = anchor.rpartition(".")
        if parent in modules() and leaf not in importlib.import_module(parent).__all__:
            not_exported.add(anchor)
    assert undocumented == set(), "document these in docs/reference*.md, or take them out of __all__"
    assert not_exported == set(), "documented but not in their module's __all__"
    for name in slurm_resolver.__all__:
        if name != "__version__":
            assert any(re.search(rf"^slurm_resolver\.[\w.]*\b{name}$", i) for i in ids), f"{name} is not documented"


def test_the_reference_is_one_page_per_area_without_a_repr_dump(site: Path) -> None:
    areas = ["resolvers", "launchers", "extending", "bootstrap", "adapters", "training", "templates", "tools"]
    assert REFERENCE == sorted(["reference", *(f"reference-{area}" for area in areas)])
    for page in REFERENCE:
        html = (site / f"{page}.html").read_text()
        assert "Variable(" not in html, f"{page}: VARIABLES' repr (as a value, or a link's title)"
        assert not re.search(r"\b_PORT_BASE", html), f"{page}: a private sentinel shown as a default"
    tools = (site / "reference-tools.html").read_text()
    variables = tools[tools.index('id="slurm_resolver.variables.VARIABLES"'):]
    assert 'href="variables.html#environment-variable-reference"' in variables[:variables.index("</div>", 2000)]
    resolvers = re.sub(r"<[^>]+>", "", (site / "reference-resolvers.html").read_text())
    assert "port_base=8888" in resolvers and "SLURM_RESOLVER_PORT_BASE" in resolvers
    assert "fanout=8," in re.sub(r"<[^>]+>", "", (site / "reference-bootstrap.html").read_text())  # not DEFAULT_FANOUT


def test_no_page_is_over_200_kb(site: Path) -> None:
    """A page a browser opens from disk at once: a reference page that grows past it is split by area."""
    sizes = {str(p.relative_to(site)): p.stat().st_size for p in site.rglob("*.html")}
    assert max(sizes.values()) > 20_000, "the site was built"
    assert {page: size for page, size in sizes.items() if size > 200_000} == {}


def test_bootstraps_keywords_are_listed_with_their_real_defaults(site: Path) -> None:
    """``bootstrap(**keywords)`` hides its knobs: the bootstrap's reference page lists each with its default."""
    from slurm_resolver.rpc.options import FIELDS

    html = (site / "reference-bootstrap.html").read_text()
    table = html[html.index('id="the-keywords-of-bootstrap"'):].split("</table>")[0]
    rows = {re.sub(r"<[^>]+>", "", cells[0]): re.sub(r"<[^>]+>", "", cells[1]) for cells in
            (re.findall(r"<td>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)) if cells}
    assert list(rows) == [field.name for field in FIELDS]
    for field in FIELDS:
        if isinstance(field.default, (int, float)) and not isinstance(field.default, bool):
            assert re.match(rf"{field.default:g}\b", rows[field.name]), f"{field.name}: {rows[field.name]}"
        elif isinstance(field.default, str):
            assert rows[field.name] == field.default, f"{field.name}: {rows[field.name]}"
    assert rows["timeout"] == "60 s"


def test_every_public_name_has_a_docstring() -> None:
    import griffe

    package = griffe.load("slurm_resolver", search_paths=[str(ROOT)], resolve_aliases=True, resolve_external=False)
    bare = set()
    for name in modules():
        module = package[name.removeprefix("slurm_resolver.")] if name != "slurm_resolver" else package
        for export in getattr(importlib.import_module(name), "__all__", ()):
            member = module[export] if export != "__version__" else None
            target = member.final_target if member is not None and member.is_alias else member
            if target is not None and not target.docstring:
                bare.add(f"{name}.{export}")
    assert bare == set(), "give each a docstring (a constant: a string on the next line)"


def test_code_blocks_are_highlighted(site: Path) -> None:
    for name, html in pages(site).items():
        blocks = re.findall(r'(<div class="[^"]*highlight[^"]*">(?:<span class="filename">[^<]*</span>)?)?'
                            r'<pre(?! class="mermaid")[^>]*>', html)  # a block with a title names its file first
        assert "" not in blocks, f"{name}: {blocks.count('')} code blocks without highlighting"


def test_no_paragraph_is_repeated_on_a_page(site: Path) -> None:
    for name, html in pages(site).items():
        if name.startswith("reference"):
            continue  # the reference repeats what many objects share ("on the running event loop")
        paragraphs = Counter(re.sub(r"\s+", " ", p) for p in re.findall(r"<p>(.*?)</p>", html, re.S) if len(p) > 80)
        assert [p for p, n in paragraphs.items() if n > 1] == [], name


def test_no_table_repeats_a_row(site: Path) -> None:
    """A row's first cell comes back only right below it (a group, such as a framework's adapters)."""
    for name, html in pages(site).items():
        for table in re.findall(r"<tbody>(.*?)</tbody>", html, re.S):
            keys = [re.sub(r"<[^>]+>", "", row.split("</td>")[0]) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
            groups = [key for i, key in enumerate(keys) if i == 0 or key != keys[i - 1]]
            assert [k for k, n in Counter(groups).items() if n > 1] == [], f"{name}: rows repeated"


def test_troubleshooting_has_a_heading_per_error_that_the_toc_and_the_search_find(site: Path) -> None:
    """One page per phase of a job; each error a heading, with its cause and fix under it."""
    phases = sorted(p.stem for p in (DOCS / "troubleshooting").glob("*.md"))
    assert phases == ["bootstrap", "launch", "restarts", "submit", "training"]
    searched = {entry["location"] for entry in json.loads((site / "search" / "search_index.json").read_text())["docs"]}
    for phase in phases:
        html = (site / "troubleshooting" / f"{phase}.html").read_text()
        assert f'href="troubleshooting/{phase}.html"' in (site / "troubleshooting.html").read_text()
        toc = html[html.index('aria-label="Table of contents"'):html.index("</nav>", html.index('aria-label="Table'))]
        errors = re.findall(r'<h2 id="([^"]+)">(.*?)</h2>', html, re.S)
        assert errors, phase
        for anchor, body in zip([a for a, _ in errors], re.split(r"<h2 id=", html)[2:]):
            assert f'href="#{anchor}"' in toc, f"{phase}: {anchor} is not in the table of contents"
            assert f"troubleshooting/{phase}.html#{anchor}" in searched, f"{phase}: {anchor} is not searched"
            section = body.split("</article>")[0]
            assert "<strong>Cause:</strong>" in section and "<strong>Fix:</strong>" in section, f"{phase}: {anchor}"


def test_the_protocols_scheme_keeps_its_four_steps(site: Path) -> None:
    """Two bullets nested by 3 spaces once made the scheme's 4 steps 6 (the issue that brought these tests)."""
    html = (site / "protocol.html").read_text()
    scheme = html[html.index('id="the-scheme"'):]
    steps, depth = 0, 0
    for close, tag in re.findall(r"<(/?)(ol|ul|li)\b", scheme[scheme.index("<ol>"):]):
        if tag != "li":
            depth += -1 if close else 1
            if depth == 0:
                break
        steps += tag == "li" and not close and depth == 1
    assert steps == 4


def test_nested_lists_are_indented_by_four_spaces() -> None:
    """Python-Markdown nests a list item indented by 4 spaces; 1 to 3 (or 5 to 7) end the outer list instead."""
    for page in sorted(DOCS.rglob("*.md")):
        wrong = [line for line in page.read_text().splitlines() if re.match(r"( {1,3}| {5,7})([-*+]|\d+\.) ", line)]
        assert wrong == [], f"{page.name}: {wrong}"


def placement_diagram() -> str:
    """concepts.md's picture of ``srun -N2 -n8`` under each distribution, from placement's own functions."""
    nodes, counts = ("node1", "node2"), (4, 4)
    layouts = {"block": ("-m block: each node filled in turn", placement.block(nodes, counts)),
               "cyclic": ("-m cyclic: one task a node, round-robin", placement.cyclic(nodes, counts)),
               "plane": ("-m plane=2: two at a time, round-robin", placement.plane(nodes, counts, 2))}
    lines = ['%%{init: {"flowchart": {"nodeSpacing": 20, "rankSpacing": 10}}}%%', "flowchart TB"]
    for name, (title, hosts) in layouts.items():
        lines += [f'    subgraph {name}["{title}"]', "        direction LR"]
        for node in nodes:
            ranks = [rank for rank, host in enumerate(hosts) if host == node]
            lines += [f'        subgraph {name}_{node}["{node}"]', "            direction LR",
                      "            " + " ~~~ ".join(f'{name}{rank}(("{rank}"))' for rank in ranks), "        end"]
        lines += [f"        {name}_{nodes[0]} ~~~ {name}_{nodes[1]}", "    end"]
    lines.append("    block ~~~ cyclic ~~~ plane")
    return "\n".join(lines) + "\n"


def test_the_placement_picture_is_slurms_layout() -> None:
    assert f"```mermaid\n{placement_diagram()}```" in (DOCS / "concepts.md").read_text()


OPEN_SHADOWS = ("const attach = Element.prototype.attachShadow;"
                "Element.prototype.attachShadow = function (o) { return attach.call(this, {...o, mode: 'open'}); };")
"""The theme draws each diagram in a closed shadow root; the test opens them to measure the text."""

DIAGRAM_TEXT = r"""[...document.querySelectorAll('div.mermaid')].map(diagram => {
  const sizes = [];  // the size of each piece of text as drawn: its font size times the SVG's scale
  for (const el of diagram.shadowRoot.querySelectorAll('svg text, svg tspan, svg foreignObject *')) {
    const own = [...el.childNodes].some(node => node.nodeType === Node.TEXT_NODE && node.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const scale = (el.closest('foreignObject') || el).getScreenCTM().a;
    sizes.push([parseFloat(getComputedStyle(el).fontSize) * scale, el.textContent.trim().slice(0, 40)]);
  }
  return sizes.sort((a, b) => a[0] - b[0])[0] || [0, 'no text'];
})"""


@pytest.fixture(scope="module")
def browser(site: Path) -> Iterator[Chromium]:
    """Headless Chromium, a window 1280 pixels wide, no network: the site as a reader opens it from disk."""
    assert shutil.which("chromium"), "Debian's chromium is installed by scripts/test"
    with Chromium(site.parent / "chromium", width=1280, height=900) as chromium:
        chromium.call("Page.enable", session=True)
        chromium.call("Page.addScriptToEvaluateOnNewDocument", session=True, source=OPEN_SHADOWS)
        yield chromium


def file_of(url: str) -> Path:
    return Path(unquote(urlsplit(url).path))


def test_every_navigation_link_opens_a_page_from_disk(site: Path, browser: Chromium) -> None:
    """As the README says: build, then open site/index.html; every link of every page names a file."""
    to_visit, visited = [(site / "index.html").as_uri()], set()
    while to_visit:
        url = to_visit.pop()
        if url in visited:
            continue
        browser.open(url)
        visited.add(url)
        assert browser.evaluate("!!document.querySelector('article.md-content__inner h1')"), f"{url}: not a page"
        navigation = browser.evaluate("[...document.querySelectorAll('.md-nav a[href]')].map(a => a.href)")
        links = browser.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
        for link in links:
            assert not link.startswith("file:") or file_of(link).is_file(), f"{url} links to {link}: no file"
        to_visit += [link.split("#")[0] for link in navigation if link.startswith("file:")]
    pages = {p for p in site.rglob("*.html") if p.name != "404.html"}
    assert {file_of(url) for url in visited} == pages


def test_the_search_box_finds_pages_from_disk(site: Path, browser: Chromium) -> None:
    browser.open((site / "troubleshooting.html").as_uri())
    assert browser.evaluate("!!document.querySelector('input.md-search__input')"), "no search box"
    browser.evaluate("document.querySelector('input.md-search__input').focus()")
    for key in "preemption":
        browser.call("Input.dispatchKeyEvent", session=True, type="keyDown", text=key, key=key)
        browser.call("Input.dispatchKeyEvent", session=True, type="keyUp", key=key)
    browser.wait("document.querySelectorAll('.md-search-result__item').length > 0", timeout=30)
    first = browser.evaluate("document.querySelector('.md-search-result__item a').href")
    assert file_of(first).is_file(), first


WORDS_BROKEN_IN_TABLES = r"""(() => {
  const broken = [];  // a word of a table's code drawn on two lines
  let words = 0;
  for (const code of document.querySelectorAll('.md-typeset td code, .md-typeset th code')) {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      for (const word of text.textContent.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(text, word.index);
        range.setEnd(text, word.index + word[0].length);
        words += 1;
        if (new Set([...range.getClientRects()].map(line => Math.round(line.bottom))).size > 1) broken.push(word[0]);
      }
    }
  }
  return [words, broken];
})()"""

HEADINGS_SMALLER_THAN_TEXT = """(() => {
  const paragraph = document.querySelector('.md-typeset p');
  if (!paragraph) return [];
  const text = parseFloat(getComputedStyle(paragraph).fontSize);
  const name = heading => heading.querySelector(':scope > code') || heading;  // the name as drawn
  return [...document.querySelectorAll('.doc-heading')]
    .filter(h => parseFloat(getComputedStyle(name(h)).fontSize) < text).map(h => h.id);
})()"""


def test_identifiers_stay_whole_in_tables_and_headings_no_smaller_than_text(site: Path, browser: Chromium) -> None:
    """In a 1280-pixel window, no word of a table's code is broken over two lines (``--exchange``,
    ``SLURM_RESOLVER_RENDEZVOUS_PORTS``), and no heading of the reference is smaller than its text."""
    words, broken, small = 0, {}, {}
    for page in sorted(site.rglob("*.html")):
        browser.open(page.as_uri())
        checked, broken[page.name] = browser.evaluate(WORDS_BROKEN_IN_TABLES)
        words += checked
        small[page.name] = browser.evaluate(HEADINGS_SMALLER_THAN_TEXT)
    assert words > 1000
    assert {page: words for page, words in broken.items() if words} == {}
    assert {page: ids for page, ids in small.items() if ids} == {}
    assert all(small.get(f"{page}.html") == [] for page in REFERENCE)


def test_the_diagrams_render_without_the_internet_and_read_at_12_px(site: Path, browser: Chromium) -> None:
    """Every diagram drawn from the vendored Mermaid; in a 1280-pixel window none of its text is below 12 px."""
    sources = {p: p.read_text().count("```mermaid") for p in DOCS.rglob("*.md")}
    with_diagrams = sorted(page.relative_to(DOCS).with_suffix(".html") for page, count in sources.items() if count)
    assert {Path("bootstrap.html"), Path("concepts.html"), Path("protocol.html"), Path("training.html")} <= set(
        with_diagrams)
    drawn, smallest = {}, {}
    for page in with_diagrams:
        with suppress(TimeoutError):  # a diagram Mermaid cannot draw stays a <pre>: counted below
            browser.open((site / page).as_uri(), ready="!document.querySelector('pre.mermaid')", timeout=60)
        drawn[page] = browser.evaluate("document.querySelectorAll('div.mermaid').length")
        for number, (size, text) in enumerate(browser.evaluate(DIAGRAM_TEXT), 1):
            smallest[f"{page} diagram {number}: {text!r}"] = round(size, 1)
    assert drawn == {page: sources[DOCS / page.with_suffix(".md")] for page in with_diagrams}
    assert {where: size for where, size in smallest.items() if size < 12} == {}, "draw it top to bottom, or shorter"
