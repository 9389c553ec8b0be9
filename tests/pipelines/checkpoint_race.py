"""A streaming job whose first bundle outlives a Flink checkpoint interval: run by ``test_flink.py``.

``python -m tests.pipelines.checkpoint_race OUT [--raw] [FLAGS...]``: ``Impulse`` -> a
stateless step that takes 6 s before it yields ``ELEMENTS`` elements -> a stateful step
that marks each element it gets with an empty file ``OUT/<i>``; prints how many it marked.
The options come from okl's :func:`pipelines.common.pipeline_options` (``--raw``: Beam's
own ``PipelineOptions``, without okl's settings). Flink checkpoints every 300 ms, so the
first checkpoint always finds the slow bundle open.
"""

import os
import sys
import time

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

from pipelines import local_runners
from pipelines.common import pipeline_options

ELEMENTS = 5
SLOW_SECONDS = 6.0


def slow_elements(_):
    """The elements of the impulse, after outliving many checkpoint intervals."""
    time.sleep(SLOW_SECONDS)
    return [(i % 2, i) for i in range(ELEMENTS)]


class MarkElements(beam.DoFn):
    """A stateful step (state per key): an element it gets leaves an empty file named by its value."""

    COUNT = ReadModifyWriteStateSpec("count", VarIntCoder())

    def __init__(self, out: str):
        self.out = out

    def process(self, element, count=beam.DoFn.StateParam(COUNT)):
        count.write((count.read() or 0) + 1)
        open(os.path.join(self.out, str(element[1])), "w").close()


def main(argv: list[str]) -> int:
    out, raw, flags = argv[0], "--raw" in argv[1:], [a for a in argv[1:] if a != "--raw"]
    argv = [*local_runners.flink_runner_options(parallelism=2), "--streaming", "--checkpointing_interval=300",
            "--shutdown_sources_after_idle_ms=3000", *flags]
    options = PipelineOptions(argv) if raw else pipeline_options(argv)
    with beam.Pipeline(options=options) as p:
        _ = p | beam.Impulse() | "Slow" >> beam.FlatMap(slow_elements) | "Mark" >> beam.ParDo(MarkElements(out))
    print(f"marked {len(os.listdir(out))} of {ELEMENTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
