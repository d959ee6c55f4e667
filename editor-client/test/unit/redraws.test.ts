import { test } from "node:test";
import assert from "node:assert/strict";
import { Redraws } from "../../src/core/redraws";
import type { Scheduler } from "../../src/core/stepStore";

/** Timers on a clock the test moves. */
class Clock implements Scheduler {
  now = 1000;
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private next = 0;
  set(fn: () => void, ms: number): unknown {
    const id = ++this.next;
    this.timers.push({ at: this.now + ms, fn, id });
    return id;
  }
  clear(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }
  advance(ms: number): void {
    this.now += ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= this.now).sort((a, b) => a.at - b.at)[0];
      if (!due) return;
      this.clear(due.id);
      due.fn();
    }
  }
}

/** What of VS Code the race is about: the extension host keeps the rows it was given, a redraw of
 *  the whole tree drops them, and a reveal walks down the rows it resolved a moment before (the
 *  group it expands is asked for by its handle: once dropped, it has no children). */
class Host {
  generation = 0;
  readonly events: string[] = [];
  private step: (() => void) | undefined;
  fire(nodes: string[] | undefined): void {
    if (!nodes) this.generation++;
    this.events.push(nodes ? `redraw ${nodes.join(",")}` : "redraw all");
  }
  /** A reveal that resolves its parent chain, then waits for the workbench (`finishReveal`). */
  async reveal(what: string): Promise<void> {
    const resolvedAt = this.generation;
    this.events.push(`reveal ${what}`);
    await new Promise<void>((res) => (this.step = res));
    if (this.generation !== resolvedAt) throw new Error(`No tree item with id 'group:r:1:0:true' found (${what} not shown)`);
    this.events.push(`shown ${what}`);
  }
  finishReveal(): void {
    const s = this.step;
    this.step = undefined;
    s?.();
  }
}

const tick = () => new Promise<void>((res) => setImmediate(res));

function setUp() {
  const clock = new Clock();
  const host = new Host();
  const logged: string[] = [];
  const redraws = new Redraws<string>({ fire: (n) => host.fire(n), gapMs: 300, scheduler: clock, now: () => clock.now, log: (l) => logged.push(l) });
  return { clock, host, logged, redraws };
}

test("a redraw asked for while a reveal is under way waits for it: sent then, it would drop the rows the reveal walks down", async () => {
  const { clock, host, logged, redraws } = setUp();
  redraws.refresh(); // the run list came: drawn at once
  const shown = redraws.reveal("step 1", () => host.reveal("step 1"));
  await tick();
  assert.deepEqual(host.events, ["redraw all", "reveal step 1"]);
  redraws.refresh(); // the stepper's run was chosen: the whole tree again, 300 ms later at the earliest
  clock.advance(250);
  assert.deepEqual(host.events, ["redraw all", "reveal step 1"], "no redraw while the reveal is under way (its first 300 ms)");
  assert.equal(redraws.busy, true);
  host.finishReveal();
  assert.equal(await shown, "shown");
  await tick();
  clock.advance(50); // (then at the redraws' pace: 300 ms after the last)
  assert.deepEqual(host.events, ["redraw all", "reveal step 1", "shown step 1", "redraw all"]);
  assert.deepEqual(logged, []);
});

test("a reveal comes after the redraws pending when it was asked for, at the pace redraws go", async () => {
  const { clock, host, redraws } = setUp();
  redraws.refresh("run a"); // at once: the tree was quiet
  redraws.refresh("run b"); // within 300 ms of it: waits
  const shown = redraws.reveal("step 4", () => host.reveal("step 4"));
  await tick();
  assert.deepEqual(host.events, ["redraw run a"], "the reveal waits for the pending redraw");
  clock.advance(299);
  await tick();
  assert.deepEqual(host.events, ["redraw run a"]);
  clock.advance(1);
  await tick();
  assert.deepEqual(host.events, ["redraw run a", "redraw run b", "reveal step 4"]);
  host.finishReveal();
  assert.equal(await shown, "shown");
});

test("of the reveals asked for while one is under way the latest wins; a failed one is logged, not swallowed", async () => {
  const { host, logged, redraws } = setUp();
  const first = redraws.reveal("step 1", () => host.reveal("step 1"));
  await tick();
  const second = redraws.reveal("step 2", () => host.reveal("step 2"));
  const third = redraws.reveal("step 3", () => host.reveal("step 3"));
  assert.equal(await second, "superseded");
  host.finishReveal();
  assert.equal(await first, "shown");
  await tick();
  assert.deepEqual(host.events, ["reveal step 1", "shown step 1", "reveal step 3"]);
  // the tree was redrawn whole under the reveal's feet (by something other than these redraws)
  host.generation++;
  host.finishReveal();
  assert.equal(await third, "failed");
  assert.equal(logged.length, 1);
  assert.match(logged[0], /^the Runs view did not show step 3: No tree item with id/);
});

test("redraws wait for a reveal one gap at most: VS Code answers a reveal late while a streaming run floods the extension host, and the run's row must still count its steps", async () => {
  const { clock, host, redraws } = setUp();
  const shown = redraws.reveal("run r", () => host.reveal("run r"));
  await tick();
  clock.advance(100);
  redraws.refresh("run r"); // a batch of steps came
  clock.advance(199);
  await tick();
  assert.deepEqual(host.events, ["reveal run r"], "held while the reveal is under way");
  clock.advance(1);
  await tick();
  assert.deepEqual(host.events, ["reveal run r", "redraw run r"], "sent once the reveal has had 300 ms");
  redraws.refresh("run r"); // the next batch, the reveal still under way: at the redraws' pace
  clock.advance(299);
  await tick();
  assert.equal(host.events.length, 2);
  clock.advance(1);
  await tick();
  assert.deepEqual(host.events, ["reveal run r", "redraw run r", "redraw run r"]);
  host.finishReveal();
  assert.equal(await shown, "shown");
});
