"""Ingestion into vector memory: a generated text corpus (1 MB by default) chunked, embedded and written by
`VectorMemory.add` into a `SqliteVectorStore` file, with each embedder in a process of its own.

    hatch run bench-ingest:python tools/bench/bench_ingest.py [--mb 1.0] [--smollm2-kb 20] [--quick]

Embedders:

- ``hashing``: ext-testing's `HashingEmbedder` (256 dimensions, pure Python, no model): almost free, so its row is
  the cost of chunking and of the store (sqlite-vec through apsw).
- ``wordllama``: `WordLlamaEmbeddingClient()` (256 dimensions, WordLlama's static embeddings from its wheel, numpy,
  256 chunks a call): what `ext memory add` does with no --embedder.
- ``smollm2``: `LlamaCppEmbeddingClient()` on the embedded SmolLM2-135M (576 dimensions, llama.cpp in process,
  batches of 16 chunks): the former default (`--embedder smollm2`). It takes about an hour a MB, so it ingests a
  sample (`--smollm2-kb`, 20 KB) and its "s/MB" column is that sample's time scaled to 1 MB (linear: every chunk
  costs one forward pass of the same size). A row minus the hashing row is the embedding cost.

Each runs in a fresh child process, so its peak RSS (``ru_maxrss``: the interpreter, the model, the corpus, the
store) is its own. Printed per embedder: corpus size, chunks, model load time, ingestion time (chunking,
embedding, upsert; the load not included), chunks/s, MB/s, seconds per MB, CPU seconds per MB (the process's
user + system time over the ingestion, every thread counted: on a machine shared with other work this is the
figure that does not depend on the load) and peak RSS. ``--quick`` ingests 2 KB: a check that
everything runs (tools/tests/bench/test_bench_ingest.py), not a measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

EMBEDDERS = ("hashing", "wordllama", "smollm2")
HEADER = (
    "embedder", "corpus MB", "chunks", "load s", "ingest s", "chunks/s", "MB/s", "s/MB", "CPU s/MB", "peak RSS MB",
)  # fmt: skip
HASHING_SIZE = 256
QUICK_BYTES = 2 * 1024

_WORDS = [
    "river",
    "stone",
    "lamp",
    "harbour",
    "ferry",
    "bakery",
    "island",
    "window",
    "garden",
    "market",
    "letter",
    "winter",
    "summer",
    "north",
    "south",
    "engine",
    "signal",
    "keeper",
    "ledger",
    "canal",
    "bridge",
    "tower",
    "meadow",
    "orchard",
    "copper",
    "silver",
    "lantern",
    "compass",
    "anchor",
    "sail",
]


def corpus(size: int, seed: int = 0) -> str:
    """About `size` bytes of ASCII sentences from a small vocabulary, the same for a given seed."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        words = rng.choices(_WORDS, k=rng.randint(6, 18))
        sentence = " ".join(words).capitalize() + ". "
        parts.append(sentence)
        total += len(sentence)
    return "".join(parts)[:size]


@dataclass
class Measured:
    embedder: str
    corpus_bytes: int
    chunks: int
    load_s: float
    ingest_s: float
    ingest_cpu_s: float
    peak_rss_bytes: int


def _make_embedder(name: str) -> Any:
    if name == "hashing":
        from ext.testing.hashing_embedder import HashingEmbedder

        return HashingEmbedder(HASHING_SIZE)
    if name == "wordllama":
        from ext.models.wordllama import WordLlamaEmbeddingClient

        return WordLlamaEmbeddingClient()
    from ext.models.llama_cpp import LlamaCppEmbeddingClient

    return LlamaCppEmbeddingClient()


async def ingest(name: str, size: int, folder: Path) -> Measured:
    """Load `name`'s embedder, then add a `size`-byte corpus to a fresh store file in `folder`, timed apart."""
    from ext.memory import MemoryDocument, VectorMemory
    from ext.vectors.sqlite import SqliteVectorStore

    text = corpus(size)
    started = time.perf_counter()
    embedder = _make_embedder(name)
    loaded = time.perf_counter()
    vector_size = embedder.vector_size or HASHING_SIZE
    async with SqliteVectorStore(str(folder / f"{name}.db"), collection_name="bench", vector_size=vector_size) as store:
        memory = VectorMemory(embedder, store)
        begun, cpu_begun = time.perf_counter(), time.process_time()
        ids = await memory.add([MemoryDocument(text=text, source="corpus.txt")])
        done, cpu_done = time.perf_counter(), time.process_time()
        stored = await store.count()
    await embedder.close()
    if stored != len(ids):
        raise AssertionError(f"{name}: {len(ids)} chunks written, {stored} in the store")
    # ru_maxrss is in KiB on Linux, in bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return Measured(name, len(text.encode()), len(ids), loaded - started, done - begun, cpu_done - cpu_begun, peak)


def run_child(name: str, size: int) -> Measured:
    """`ingest` in a fresh interpreter (its own peak RSS); its result comes back as one JSON line."""
    with tempfile.TemporaryDirectory(prefix="ext-bench-ingest-") as folder:
        done = subprocess.run(
            [sys.executable, __file__, "--child", name, "--bytes", str(size), "--folder", folder],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the {name} child failed:\n{done.stderr[-3000:]}")
    return Measured(**json.loads(done.stdout.strip().splitlines()[-1]))


def table(rows: list[Measured]) -> list[str]:
    """The printed table: a header, a rule, one line per embedder."""
    cells = [HEADER]
    for m in rows:
        mb = m.corpus_bytes / 1e6
        cells.append(
            (
                m.embedder,
                f"{mb:.3f}",
                str(m.chunks),
                f"{m.load_s:.2f}",
                f"{m.ingest_s:.2f}",
                f"{m.chunks / m.ingest_s:,.1f}",
                f"{mb / m.ingest_s:.3f}",
                f"{m.ingest_s / mb:,.1f}",
                f"{m.ingest_cpu_s / mb:,.1f}",
                f"{m.peak_rss_bytes / 2**20:.0f}",
            )
        )
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--mb", type=float, default=1.0, help="corpus size in MB (10^6 bytes)")
    parser.add_argument("--smollm2-kb", type=float, default=20.0, help="smollm2's sample in KB (10^3 bytes)")
    parser.add_argument("--quick", action="store_true", help="a 2 KB corpus: checks that it runs")
    parser.add_argument("--embedder", action="append", choices=EMBEDDERS, help="only these (repeatable)")
    parser.add_argument("--child", choices=EMBEDDERS, help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        measured = asyncio.run(ingest(args.child, args.bytes, Path(args.folder)))
        print(json.dumps(asdict(measured)))
        return 0
    size = QUICK_BYTES if args.quick else int(args.mb * 1e6)
    sample = QUICK_BYTES if args.quick else int(args.smollm2_kb * 1e3)
    rows = [run_child(name, sample if name == "smollm2" else size) for name in args.embedder or EMBEDDERS]
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
