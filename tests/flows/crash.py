"""An actor that works twice, then kills its own process (SIGKILL: no handler, no cleanup)."""

from __future__ import annotations

import os
import signal

from flowtape import Port, action, connect, task, workflow


@task
class Worker:
    done: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def work(self):
        if self.done == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        self.done += 1
        return self.done * 10


@workflow
def main():
    worker = Worker()
    connect(worker.Out, "Out")
