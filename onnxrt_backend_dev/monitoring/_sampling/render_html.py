"""The sampled profile as one self-contained, offline HTML page: a call tree per thread
(the hottest path and the user's code open), a timeline (what ran when, per thread, as
a flame chart), the hot lines, and a search box. Every name and file comes from frames
(untrusted): they reach the page only as escaped JSON in a script element
(:func:`script_json`) and are written with ``textContent``, never as markup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._html import script_json
from .._html import text as escape_text
from .model import CPROFILE, SampledProfile
from .render_json import to_dict
from .render_text import header
from .view import FOLD_SHARE, Row, timeline_boxes

# Offline and inert: nothing is fetched, only the page's own inline script and style run.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
OPEN_SHARE = 0.05  # rows holding at least 5 % of their thread start open

_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:8px 14px;background:#263238;color:#eceff1}
header h1{font-size:15px;margin:0 0 2px}
.notes{color:#ffcc80;font-size:12px}
nav{padding:6px 14px;background:#eceff1;border-bottom:1px solid #cfd8dc}
nav button{margin-right:4px;padding:3px 10px;border:1px solid #90a4ae;background:#fff;
 border-radius:3px;cursor:pointer}
nav button.on{background:#455a64;color:#fff}
nav input{margin-left:16px;padding:3px 6px;width:260px}
main{padding:8px 14px}
.thread{margin:10px 0 4px;font-weight:600}
.row{white-space:nowrap;font-family:ui-monospace,monospace;font-size:12.5px;cursor:default}
.row .tog{display:inline-block;width:14px;cursor:pointer;color:#607d8b}
.row .t{display:inline-block;width:64px;text-align:right;color:#37474f}
.row .p{display:inline-block;width:56px;text-align:right;color:#78909c;margin-right:8px}
.row .bar{display:inline-block;height:8px;background:#90caf9;margin-right:6px;vertical-align:middle;
 white-space:nowrap;font-size:0}
.seg{display:inline-block;height:8px}
.s0{background:#1e88e5}.s1{background:#43a047}.s2{background:#fb8c00}.s3{background:#cfd8dc}
td.c0{background:#e3f2fd}td.c1{background:#e8f5e9}td.c2{background:#fff3e0}td.c3{background:#f5f5f5}
td.c0,td.c1,td.c2,td.c3{text-align:right}
.legend span{display:inline-block;margin-right:10px;font-size:11.5px}
.legend i{display:inline-block;width:10px;height:8px;margin-right:3px}
.k-user .n{color:#0d47a1;font-weight:600}.k-task .n{color:#0d47a1;font-weight:600}
.k-library .n{color:#455a64}.k-import .n{color:#6a1b9a}.k-idle .n{color:#9e9e9e}
.k-more .n{color:#9e9e9e;font-style:italic}
.f{color:#90a4ae;margin-left:8px}.h{color:#a1887f;margin-left:8px;font-size:11.5px}
.w{color:#ef6c00;margin-left:8px;font-size:11.5px}
.match{background:#fff59d}
.lane{position:relative;border:1px solid #cfd8dc;background:#fff;margin-bottom:10px;
 overflow:hidden}
.box{position:absolute;height:16px;font-size:11px;line-height:16px;overflow:hidden;
 white-space:nowrap;border-right:1px solid #fff;box-sizing:border-box;padding-left:2px;
 color:#102027}
.b-user,.b-task{background:#90caf9}.b-library{background:#cfd8dc}.b-import{background:#ce93d8}
.b-idle{background:#eeeeee;color:#9e9e9e}
.axis{font-size:11px;color:#78909c;margin:2px 0 8px}
table{border-collapse:collapse;margin-bottom:12px}
td,th{padding:2px 8px;text-align:left;font-family:ui-monospace,monospace;font-size:12.5px}
th{background:#eceff1}
.hidden{display:none}
"""

_JS = r"""
const DATA = JSON.parse(document.getElementById('profile-data').textContent);
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function fmt(s) { return s >= 1 ? s.toFixed(3) + ' s' : (s * 1000).toFixed(1) + ' ms'; }
// Shares of a time in Python, native code, the kernel and waiting (adding up to 1).
function shares(wall, cpu, py, nat, sys) {
  if (wall <= 0) return [0, 0, 0, 0];
  const split = py + nat + sys, busy = Math.min(cpu / wall, 1);
  if (split <= 0) return [0, busy, 0, 1 - busy];
  return [busy * py / split, busy * nat / split, busy * sys / split, 1 - busy];
}
const SPLIT = ['Python', 'native', 'system', 'waiting'];
function splitText(sh) {
  return SPLIT.map(function (n, i) { return n + ' ' + Math.round(100 * sh[i]) + ' %'; }).join(', ');
}
function splitBar(bar, sh) {  // the bar's width split by colour
  sh.forEach(function (x, i) {
    const seg = el('span', 'seg s' + i);
    seg.style.width = (100 * x) + '%';
    bar.appendChild(seg);
  });
}
const ROWS = [];
function buildTree(host) {
  DATA.threads.forEach(function (th, ti) {
    const root = th.rows[0];
    const rootShares = root ? shares(root.wall, root.cpu, root.python, root.native, root.system)
      : [0, 0, 0, 0];
    host.appendChild(el('div', 'thread', 'thread ' + th.name + ' \u2014 ' + fmt(th.wall) +
      (th.cpu > 0 ? ', CPU ' + fmt(th.cpu) : '') +
      (root && root.pool ? ', pool CPU ' + fmt(root.pool) : '') +
      (DATA.split_known ? ' (' + splitText(rootShares) + ')' : '')));
    const total = th.wall || 1;
    const kids = th.rows.map(function () { return []; });
    th.rows.forEach(function (r, i) { if (r.parent >= 0) kids[r.parent].push(i); });
    // The hottest path: from the root, the heaviest child at each step.
    const hot = new Set();
    let at = 0;
    while (at >= 0 && th.rows.length) {
      hot.add(at);
      let best = -1;
      kids[at].forEach(function (k) {
        if (best < 0 || th.rows[k].wall > th.rows[best].wall) best = k;
      });
      at = best;
    }
    const nodes = [];
    const depth = th.rows.map(function () { return 0; });
    th.rows.forEach(function (r, i) {
      if (i === 0) return;  // the thread's root is the header above
      depth[i] = r.parent > 0 ? depth[r.parent] + 1 : 0;
      const row = el('div', 'row k-' + r.kind);
      row.style.paddingLeft = (depth[i] * 16) + 'px';
      const tog = el('span', 'tog', kids[i].length ? '\u25b8' : '');
      row.appendChild(tog);
      row.appendChild(el('span', 't', fmt(r.wall)));
      row.appendChild(el('span', 'p', (100 * r.wall / total).toFixed(1) + ' %'));
      const bar = el('span', 'bar');
      bar.style.width = Math.max(1, Math.round(60 * r.wall / total)) + 'px';
      const sh = shares(r.wall, r.cpu, r.python, r.native, r.system);
      if (DATA.split_known) splitBar(bar, sh);
      row.appendChild(bar);
      row.appendChild(el('span', 'n', r.name));
      if (r.file) row.appendChild(el('span', 'f', r.file + ':' + r.line));
      if (r.kind === 'task') row.appendChild(el('span', 'w', 'task'));
      if (r.waiting && r.kind !== 'idle') row.appendChild(el('span', 'w', 'waiting'));
      if (r.hidden) row.appendChild(el('span', 'h', r.hidden));
      // The CPU of the threads Python does not know (a pool) while the row ran.
      if (r.pool >= 0.01 * total) row.appendChild(el('span', 'w', 'pool CPU ' + fmt(r.pool)));
      row.title = (r.path || r.name) + (r.line ? ':' + r.line : '') +
        (DATA.split_known ? ' \u2014 ' + splitText(sh) : '');
      host.appendChild(row);
      nodes[i] = {row: row, tog: tog, open: false};
      ROWS.push({row: row, text: (r.name + ' ' + r.file).toLowerCase(), thread: ti, index: i});
    });
    function show(i, visible) {  // a loop: a deep recursion must not overflow
      const todo = [[i, visible]];
      while (todo.length) {
        const top = todo.pop();
        kids[top[0]].forEach(function (k) {
          nodes[k].row.classList.toggle('hidden', !top[1]);
          todo.push([k, top[1] && nodes[k].open]);
        });
      }
    }
    function setOpen(i, open) {
      if (!nodes[i]) return;
      nodes[i].open = open;
      if (kids[i].length) nodes[i].tog.textContent = open ? '\u25be' : '\u25b8';
    }
    th.rows.forEach(function (r, i) {
      if (i === 0) return;
      setOpen(i, hot.has(i) || r.wall >= DATA.open_share * total);
      nodes[i].tog.addEventListener('click', function () {
        setOpen(i, !nodes[i].open); show(i, nodes[i].open);
      });
    });
    kids[0].forEach(function (k) {
      nodes[k].row.classList.remove('hidden'); show(k, nodes[k].open);
    });
    th.open = function (i) {  // opens the ancestors of row i
      let p = th.rows[i].parent;
      while (p > 0) { setOpen(p, true); p = th.rows[p].parent; }
      kids[0].forEach(function (k) { show(k, nodes[k].open); });
    };
  });
}
function buildTimeline(host) {
  const span = DATA.duration || 1;
  DATA.timeline.forEach(function (tl) {
    host.appendChild(el('div', 'thread', 'thread ' + tl.name));
    let depth = 0;
    tl.boxes.forEach(function (b) { depth = Math.max(depth, b[2] + 1); });
    const lane = el('div', 'lane');
    lane.style.height = (depth * 17 + 2) + 'px';
    tl.boxes.forEach(function (b) {
      const box = el('div', 'box b-' + tl.kinds[b[4]], tl.labels[b[3]]);
      box.style.left = (100 * b[0] / span) + '%';
      box.style.width = Math.max(0.05, 100 * b[1] / span) + '%';
      box.style.top = (b[2] * 17) + 'px';
      box.title = tl.labels[b[3]] + ' \u2014 ' + fmt(b[1]) + ' at ' + fmt(b[0]);
      lane.appendChild(box);
    });
    host.appendChild(lane);
  });
  host.appendChild(el('div', 'axis', '0 \u2192 ' + fmt(span) + ' (wall time, left to right)'));
}
function buildHot(host) {
  if (!DATA.hot_lines.length) { host.appendChild(el('p', '', 'no user code sampled')); return; }
  DATA.hot_lines.forEach(function (f) {
    host.appendChild(el('div', 'thread', f.function + '  ' + f.file + ':' + f.line + '  ' +
      (100 * f.share).toFixed(1) + ' %'));
    const t = el('table');
    const h = el('tr');
    const pool = f.lines.some(function (l) { return l.split.pool; });
    const cols = ['line', 'time', 'share'].concat(DATA.split_known ? SPLIT : [],
      pool ? ['pool CPU'] : [], ['source']);
    cols.forEach(function (c) { h.appendChild(el('th', '', c)); });
    t.appendChild(h);
    f.lines.forEach(function (l) {
      const tr = el('tr');
      tr.appendChild(el('td', '', String(l.line)));
      tr.appendChild(el('td', '', fmt(l.seconds)));
      tr.appendChild(el('td', '', (100 * l.share).toFixed(1) + ' %'));
      if (DATA.split_known) {
        ['python', 'native', 'system', 'waiting'].forEach(function (k, i) {
          tr.appendChild(el('td', 'c' + i, Math.round(100 * l.split[k]) + ' %'));
        });
      }
      if (pool) tr.appendChild(el('td', '', Math.round(100 * (l.split.pool || 0)) + ' %'));
      tr.appendChild(el('td', '', l.source));
      t.appendChild(tr);
    });
    host.appendChild(t);
  });
}
const views = {tree: document.getElementById('view-tree'),
  timeline: document.getElementById('view-timeline'), hot: document.getElementById('view-hot')};
buildTree(views.tree); buildTimeline(views.timeline); buildHot(views.hot);
document.querySelectorAll('nav button').forEach(function (b) {
  b.addEventListener('click', function () {
    document.querySelectorAll('nav button').forEach(function (o) { o.classList.remove('on'); });
    b.classList.add('on');
    Object.keys(views).forEach(function (k) {
      views[k].classList.toggle('hidden', k !== b.dataset.view);
    });
  });
});
document.getElementById('search').addEventListener('input', function (e) {
  const q = e.target.value.trim().toLowerCase();
  let found = 0;
  ROWS.forEach(function (r) {
    const hit = q.length > 0 && r.text.indexOf(q) >= 0;
    r.row.classList.toggle('match', hit);
    if (hit) { found++; DATA.threads[r.thread].open(r.index); }
  });
  document.getElementById('found').textContent = q ? found + ' found' : '';
});
const start = location.hash.slice(1);  // #timeline or #hot opens that view
document.querySelectorAll('nav button').forEach(function (b) {
  if (b.dataset.view === start) b.click();
});
document.body.dataset.ready = 'yes';
"""


def _legend(profile: SampledProfile) -> str:
    """The colours of the time split (where the collector measures it)."""
    if not profile.split_known:
        return ""
    names = ("Python", "native code", "system", "waiting")
    items = "".join(f"<span><i class='s{i}'></i>{n}</span>" for i, n in enumerate(names))
    return f"<div class='legend'>time split: {items}</div>"


def _timeline(profile: SampledProfile) -> list[dict[str, Any]]:
    out = []
    for thread in profile.threads:
        if not thread.totals:
            continue
        labels: dict[str, int] = {}
        kinds: dict[str, int] = {}
        boxes = []
        for b in timeline_boxes(profile, thread):
            li = labels.setdefault(b.label, len(labels))
            ki = kinds.setdefault(b.kind, len(kinds))
            boxes.append([round(b.start, 6), round(b.duration, 6), b.depth, li, ki])
        out.append(
            {"name": thread.name, "labels": list(labels), "kinds": list(kinds), "boxes": boxes}
        )
    return out


# A cProfile tree (no timeline, no lines) also opens the hottest path through the
# user's code, imports aside: the page opens on what the program did, not on what it
# loaded.
_JS_CPROFILE = r"""
DATA.threads.forEach(function (th) {
  const kids = th.rows.map(function () { return []; });
  th.rows.forEach(function (r, i) { if (r.parent >= 0) kids[r.parent].push(i); });
  let at = 0;
  for (;;) {
    let best = -1;
    kids[at].forEach(function (k) {
      const r = th.rows[k];
      if (r.kind === 'import' || r.kind === 'more') return;
      if (best < 0 || r.wall > th.rows[best].wall) best = k;
    });
    if (best < 0) break;
    at = best;
  }
  if (at > 0 && th.open) th.open(at);
});
"""

_NAV = """<button data-view="timeline">Timeline</button><button data-view="hot">Hot lines</button>
"""


def to_html(
    profile: SampledProfile,
    fold_share: float = FOLD_SHARE,
    show_all: bool = False,
    max_depth: int | None = None,
    order: Callable[[Row], Any] | None = None,
    title: str | None = None,
) -> str:
    """The page (see the module's docstring). A cProfile profile (timer
    :data:`~.model.CPROFILE`) gets the call tree only, opened along the hottest path
    through the user's code as well.

    :param profile: the profile
    :param fold_share: see :func:`~.view.visible_rows`
    :param show_all: do not fold library frames
    :param max_depth: rows deeper than this are left out (0: the top level only)
    :param order: see :func:`~.view.visible_rows`
    :param title: the page's title (None: the header line)
    :return: the HTML text
    """
    cprofile = profile.timer == CPROFILE
    data = to_dict(profile, fold_share, show_all, max_depth, order)
    data["timeline"] = [] if cprofile else _timeline(profile)
    data["open_share"] = OPEN_SHARE
    title = escape_text(header(profile) if title is None else title)
    notes = "".join(f"<div class='notes'>note: {escape_text(n)}</div>" for n in profile.notes)
    nav = "" if cprofile else _NAV
    more_js = f"<script>{_JS_CPROFILE}</script>\n" if cprofile else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<title>{title}</title><style>{_CSS}</style></head>
<body>
<header><h1>{title}</h1>{notes}</header>
<nav><button class="on" data-view="tree">Call tree</button>
{nav}<input id="search" type="search" placeholder="search functions and files">
<span id="found"></span></nav>
<main>{_legend(profile)}<div id="view-tree"></div><div id="view-timeline" class="hidden"></div>
<div id="view-hot" class="hidden"></div></main>
<script type="application/json" id="profile-data">{script_json(data)}</script>
<script>{_JS}</script>
{more_js}</body></html>
"""
