"""An external tool: `@tool(cmd=..., args=[...])` on a class makes an actor whose firing runs a
process. `{in.Text}` is replaced by the token on port Text, `{out.Stats}` by the path of a file the
tool must write; that path is the token put on Stats. Here the tool is a small Python script
shipped in examples/scripts/ (the working directory is the flow file's folder).

    flowtape run examples/tool.py
    ->  Stats: [{'words': 5, 'chars': 23, 'longest': 'dataflow'}, ...]
"""

import json

from flowtape import Port, connect, loop, task, tool, workflow

SENTENCES = [
    "every run is a dataflow",
    "tools are just processes",
    "step through the tape",
]


@tool(cmd="python3", args=["scripts/wordcount.py", "{in.Text}", "{out.Stats}"])
class WordCount:
    class Ports:
        Text = Port[str](direction="in")
        Stats = Port[str](direction="out", ext=".json")


@task
class ReadJson:
    """Reads the file the tool wrote."""

    class Ports:
        In = Port[str](direction="in")
        Out = Port[dict](direction="out")

    def action(self, path):
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)


@workflow
def main():
    lp = loop(SENTENCES)
    with lp:
        count = WordCount()
        read = ReadJson()
    connect(lp.item, count.Text)
    connect(count.Stats, read.In)
    connect(read.Out, "Stats")
