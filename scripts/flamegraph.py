#!/usr/bin/env python3
"""Fold `perf script` call stacks and draw them as a flame graph (SVG).

    cargo build --profile profiling -p mptd    # release code + line tables
    sudo benches/workers_tunnel.sh --perf perf.data   # or perf record -g
    perf script -i perf.data > stacks.txt
    scripts/flamegraph.py stacks.txt --folded out.folded --svg out.svg \
        --title "mptd, encrypted, threads = 2" --stages

Profile target/profiling/mptd, not target/release/mptd: release binaries
carry no debug info, so perf still unwinds them (.eh_frame stays) and
names their functions, but every inlined function (the wire views, the
replay window, much of the scheduler) vanishes into its caller and the
STAGES below lose their frames.

Input is the text `perf script` prints for a `perf record -g` profile: a
header line per sample (command, pid/tid, cpu, time, event) followed by
one indented line per frame, innermost first, and a blank line. Each
sample becomes one line of the folded form `thread;outer;...;inner 1`
(thread = the sampled thread's name, kernel frames marked `_[k]`); the
SVG stacks them with the thread at the bottom, each frame as wide as its
share of the samples. With --stages it also prints, as Markdown tables,
the share of samples per data-plane stage (each sample in one stage: see
STAGES), per thread, and the functions most often on top of the stack.

Standard library only; written for this project.
"""

import argparse
import collections
import hashlib
import html
import re
import sys

HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?P<pid>\d+)(?:/(?P<tid>\d+))?\s+")
OFFSET = re.compile(r"\+0x[0-9a-f]+$")
RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")

# Stages of mpt's data plane by the frames that mark them (regular
# expressions over folded frame names). Each sample goes to one stage: the
# stack is walked from the innermost frame outwards and the first frame
# that matches any stage decides (earlier entries win on the same frame).
# So a copy inside a tun write counts as a copy, and the TCP receive of
# the inner packet, which the kernel runs inside mptd's tun write, counts
# as kernel network stack.
STAGES = [
    ("AEAD seal/open (ring ChaCha20-Poly1305)", r"chacha20|poly1305|ring::aead"),
    ("memory copies (memcpy, copies to/from user)", r"memcpy|memmove|copy_user|_copy_to_iter|_copy_from_iter"),
    ("replay window", r"ReplayWindow|crypto::replay"),
    ("resequencer (mpt_proto::reorder)", r"mpt_proto::reorder"),
    ("scheduler (mpt_proto::sched)", r"mpt_proto::sched"),
    ("wire header emit/parse (mpt_proto::wire)", r"mpt_proto::wire"),
    ("crypto helper idle spin/wait (crypto_pool::Shared::helper)", r"crypto_pool::Shared::helper$"),
    ("crypto pool hand-off (other crypto_pool)", r"crypto_pool::"),
    ("futex, wake-ups, context switches", r"futex|try_to_wake_up|__schedule|finish_task_switch|pthread_cond"),
    ("kernel network stack (veth, IP, TCP; softirq)", r"net_rx_action|netif_receive_skb|process_backlog|ip_rcv|tcp_v4_rcv|ip_finish_output|dev_queue_xmit|veth_xmit|handle_softirqs|do_softirq"),
    ("UDP send (syscall)", r"udp_sendmsg|udpv6_sendmsg|__sys_sendmmsg|__sys_sendmsg"),
    ("UDP receive (syscall)", r"udp_recvmsg|udpv6_recvmsg|__sys_recvmmsg|__sys_recvmsg"),
    ("tun write (syscall)", r"tun_chr_write_iter|tun_get_user"),
    ("tun read (syscall)", r"tun_chr_read_iter|tun_do_read|tun_recvmsg"),
    ("poll wait", r"do_sys_poll|do_poll|epoll_wait|ep_poll|__poll$"),
    ("other syscall entry/exit", r"do_syscall_64|entry_SYSCALL|syscall_exit|irqentry_exit"),
    ("mptd receive worker, other (mptd::rx)", r"mptd::rx::"),
    ("mptd transmit worker, other (mptd::tx)", r"mptd::tx::"),
]
STAGE_RE = [(label, re.compile(pattern)) for label, pattern in STAGES]


def stage_of(stack):
    """The stage of one folded stack (see STAGES), or 'other'."""
    frames = stack.split(";")[1:]
    for f in reversed(frames):
        for label, rx in STAGE_RE:
            if rx.search(f):
                return label
    return "other (start-up, control loop, unrecognised)"


def frame_name(line):
    """The function name of one stack line of `perf script`."""
    parts = line.strip().split(None, 1)
    if len(parts) < 2:
        return None, False
    rest = parts[1]
    dso = ""
    if rest.endswith(")") and " (" in rest:
        rest, dso = rest.rsplit(" (", 1)
        dso = dso[:-1]
    name = OFFSET.sub("", rest.strip())
    name = RUST_HASH.sub("", name)
    kernel = "kernel.kallsyms" in dso or dso.startswith("[kernel")
    if name in ("", "[unknown]"):
        base = dso.rsplit("/", 1)[-1] if dso else "?"
        name = "[unknown in %s]" % base
    # Folded form separates frames with ';'.
    name = name.replace(";", ":")
    return name, kernel


def fold(lines):
    """Counter of folded stacks from `perf script` text."""
    stacks = collections.Counter()
    comm = None
    frames = []

    def flush():
        if comm is not None:
            stacks[";".join([comm] + frames[::-1])] += 1

    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if not line[0].isspace():
            flush()
            m = HEADER.match(line)
            comm = (m.group("comm").strip() if m else line.split()[0]).replace(";", ":")
            frames = []
            continue
        name, kernel = frame_name(line)
        if name is not None:
            frames.append(name + "_[k]" if kernel else name)
    flush()
    return stacks


def color(name):
    """A stable warm colour per function; kernel frames orange, others
    red to yellow."""
    h = int(hashlib.md5(name.encode()).hexdigest()[:8], 16)
    v = (h % 1000) / 1000.0
    if name.endswith("_[k]"):
        return "rgb(%d,%d,%d)" % (230 + int(20 * v), 140 + int(50 * v), 40 + int(30 * v))
    return "rgb(%d,%d,%d)" % (205 + int(50 * v), 60 + int(150 * v), 50 + int(30 * v))


def build_tree(stacks):
    root = {"n": 0, "c": {}}
    for stack, count in stacks.items():
        node = root
        node["n"] += count
        for f in stack.split(";"):
            node = node["c"].setdefault(f, {"n": 0, "c": {}})
            node["n"] += count
    return root


def depth_of(node):
    if not node["c"]:
        return 0
    return 1 + max(depth_of(c) for c in node["c"].values())


def svg(stacks, title, width=1200, row=16):
    root = build_tree(stacks)
    total = root["n"] or 1
    depth = depth_of(root)
    pad_top, pad_bottom = 40, 20
    height = pad_top + depth * row + pad_bottom
    out = [
        '<?xml version="1.0" standalone="no"?>',
        '<svg version="1.1" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg" '
        'font-family="Verdana, sans-serif" font-size="11">' % (width, height),
        '<rect x="0" y="0" width="%d" height="%d" fill="#f8f8f0"/>' % (width, height),
        '<text x="%d" y="22" text-anchor="middle" font-size="16">%s</text>'
        % (width // 2, html.escape(title)),
        '<text x="10" y="%d" font-size="10" fill="#555">%d samples; width = share of samples, '
        "bottom = thread, top = innermost frame; hover for details</text>"
        % (height - 5, total),
    ]
    scale = (width - 20) / total

    def draw(name, node, x, level):
        w = node["n"] * scale
        if w < 0.3:
            return
        y = height - pad_bottom - (level + 1) * row
        pct = 100.0 * node["n"] / total
        label = "%s (%d samples, %.2f%%)" % (name, node["n"], pct)
        out.append(
            '<g><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" '
            'fill="%s" rx="2"/>' % (html.escape(label), x, y, w, row - 1, color(name))
        )
        chars = int((w - 4) / 6.5)
        if chars >= 3:
            text = name if len(name) <= chars else name[: chars - 2] + ".."
            out.append('<text x="%.2f" y="%d">%s</text>' % (x + 2, y + row - 4, html.escape(text)))
        out.append("</g>")
        cx = x
        for cname, child in sorted(node["c"].items()):
            draw(cname, child, cx, level + 1)
            cx += child["n"] * scale

    x = 10.0
    for name, child in sorted(root["c"].items()):
        draw(name, child, x, 0)
        x += child["n"] * scale
    out.append("</svg>")
    return "\n".join(out) + "\n"


def stage_table(stacks, top):
    total = sum(stacks.values()) or 1
    stages = collections.Counter()
    threads = collections.Counter()
    leaves = collections.Counter()
    for s, c in stacks.items():
        parts = s.split(";")
        stages[stage_of(s)] += c
        threads[parts[0]] += c
        leaves[parts[-1] if len(parts) > 1 else "(no frames)"] += c
    lines = ["| stage (innermost recognised frame) | share of mptd samples |", "|---|---|"]
    for name, n in stages.most_common():
        lines.append("| %s | %.1f %% |" % (name, 100.0 * n / total))
    lines += ["", "| thread | share |", "|---|---|"]
    for name, n in threads.most_common():
        lines.append("| %s | %.1f %% |" % (name, 100.0 * n / total))
    lines += ["", "| function on top of the stack (exclusive) | share |", "|---|---|"]
    for name, n in leaves.most_common(top):
        lines.append("| `%s` | %.1f %% |" % (name, 100.0 * n / total))
    lines.append("")
    lines.append("%d samples" % total)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input", help="perf script output ('-' for standard input)")
    ap.add_argument("--folded", help="write the folded stacks here")
    ap.add_argument("--svg", help="write the flame graph here")
    ap.add_argument("--title", default="Flame graph")
    ap.add_argument("--stages", action="store_true", help="print the stage shares (Markdown)")
    ap.add_argument("--top", type=int, default=15, help="exclusive functions to list")
    args = ap.parse_args()

    src = sys.stdin if args.input == "-" else open(args.input, errors="replace")
    with src:
        stacks = fold(src)
    if not stacks:
        sys.exit("no samples found in %s" % args.input)
    if args.folded:
        with open(args.folded, "w") as f:
            for s, c in sorted(stacks.items()):
                f.write("%s %d\n" % (s, c))
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(stacks, args.title))
    if args.stages:
        print(stage_table(stacks, args.top))


if __name__ == "__main__":
    main()
