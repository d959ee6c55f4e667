// The graph view in the real VS Code: opened on the stepper's run, it highlights the step's actor
// and shows each queue's size as the tape has it (checked against `flowtape show --step N --json`)
// at two steps; a click on an actor reveals its line; the timeline draws the run's firings, the
// loop's inner ones within its steps, and a click on an inner one puts the stepper on it; a run
// of nested composites draws each level's bar, what it ran in rows under it, and a click selects it.
import { spawnSync } from "node:child_process";
import { join } from "node:path";

/** The graph page inside VS Code's webview iframes (an outer host frame, the page's own inside). */
function pageFrame(page) {
  return page.frameLocator("iframe.webview.ready").frameLocator("iframe#active-frame, iframe");
}

async function truth(python, ws, runId, step) {
  const r = spawnSync(python, ["-m", "flowtape", "show", runId, "--step", String(step), "--json"], { cwd: ws, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`flowtape show failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function pictureAt(frame) {
  return frame.locator("svg#svg").evaluate((svg) => {
    const active = [...svg.querySelectorAll("g.actor.active")].map((g) => g.getAttribute("data-path"));
    const sizes = {};
    for (const g of svg.querySelectorAll("g.edge")) {
      const id = g.querySelector("title")?.textContent ?? "";
      const label = svg.querySelector(`text.size[data-queue="${g.getAttribute("data-queue")}"]`);
      sizes[id] = Number(label?.textContent || 0);
    }
    return { active, sizes };
  });
}

/** The flow's editor shows `line` as its cursor's line (focused or not: a webview's late focus
 *  event may keep the status bar's Ln off while the line is revealed all the same). */
async function waitCursorLine(page, line, timeout = 15000) {
  await page.locator(`.monaco-editor .margin .active-line-number:text-is("${line}")`).first().waitFor({ timeout });
}

export async function graphStages({ page, stage, check, screenshot, runCommand, focusEditor, waitStatus, log, python, ws, flowFile, lineOf, openFile, clickRunLens }) {
  let frame;
  let runId;
  const at = async (step) => {
    const want = await truth(python, ws, runId, step);
    let got;
    const deadline = Date.now() + 15000;
    while (Date.now() < deadline) {
      got = await pictureAt(frame);
      const sizesOk = want.queues.every((q) => q.queue.startsWith("$.") || got.sizes[q.queue] === q.size);
      if (got.active.includes(want.actor) && sizesOk && (await frame.locator("#where").innerText()).startsWith(`step ${step} `)) {
        return { want, got };
      }
      await page.waitForTimeout(250);
    }
    throw new Error(`at step ${step} the graph shows ${JSON.stringify(got)}; the tape says actor ${want.actor}, queues ${JSON.stringify(want.queues.map((q) => [q.queue, q.size]))}`);
  };

  await stage("Show Graph draws the run's flow, grouped, laid out by ELK", async () => {
    await focusEditor();
    await page.keyboard.press("Alt+Home");
    await waitStatus(/step 1\/\d+/);
    await runCommand("Flowtape: Show Graph");
    frame = pageFrame(page);
    await frame.locator('g.actor[data-path="collect"]').waitFor({ timeout: 30000 });
    await frame.locator('g.actor.group[data-path="words"]').waitFor({ timeout: 5000 });
    const title = await frame.locator("#title").innerText();
    runId = title.match(/run (\S+)/)?.[1];
    check(!!runId, `the graph's title names its run: ${title}`);
    const inside = await frame.locator("svg#svg").evaluate((svg) => {
      const box = (p) => svg.querySelector(`g.actor[data-path="${p}"] > rect`)?.getBBox();
      const loop = box("words");
      const review = box("review");
      return !!loop && !!review && review.x >= loop.x && review.y >= loop.y && review.x + review.width <= loop.x + loop.width;
    });
    check(inside, "the loop's member `review` is drawn inside the loop `words`");
    log(`  graph of run ${runId}`);
  });

  await stage("the graph follows the stepper: the step's actor and each queue's size, at two steps", async () => {
    const one = await at(1);
    log(`  step 1: active ${JSON.stringify(one.got.active)}, sizes ${JSON.stringify(one.got.sizes)}`);
    await screenshot("graph-step-1");
    await focusEditor();
    await page.keyboard.press("Alt+End");
    const m = await waitStatus(/step (\d+)\/\1\b/);
    const last = await at(Number(m[1]));
    log(`  step ${m[1]}: active ${JSON.stringify(last.got.active)}, sizes ${JSON.stringify(last.got.sizes)}`);
    check(JSON.stringify(one.got) !== JSON.stringify(last.got), "the picture changed between the two steps");
    await screenshot("graph-last-step");
  });

  await stage("clicking an actor reveals its creation line and selects its latest firing", async () => {
    const line = lineOf(flowFile, "collect = Collect()");
    await focusEditor(); // the cursor elsewhere first: the click must be what puts it on the line
    await page.keyboard.press("Control+Home");
    await waitCursorLine(page, 1);
    await frame.locator('g.actor[data-path="collect"] > rect').click();
    await waitCursorLine(page, line);
    await waitStatus(/step \d+\/\d+ · collect/, 15000);
    await screenshot("graph-actor-clicked");
    // an actor inside the loop: the stepper goes into the loop's step, on its latest firing
    await frame.locator('g.actor[data-path="review"] > rect').click();
    await waitCursorLine(page, lineOf(flowFile, "review = Review()"));
    await waitStatus(/step \d+\/\d+ · words › review · fire \d+ \(\d+\/\d+\)/, 15000);
    await frame.locator('g.actor.focus[data-path="review"]').waitFor({ timeout: 10000 }); // the inner firing's actor, in focus
  });

  await stage("clicking an edge shows the queue's tokens", async () => {
    await frame.locator('g.edge:has(title:text-is("review.Out->collect.In")) path.hit').first().click({ force: true });
    const side = frame.locator("#side");
    await side.locator("h3").waitFor({ timeout: 10000 });
    const text = await side.innerText();
    check(/review\.Out->collect\.In · \d+ token/.test(text), `the queue panel names the queue: ${text.slice(0, 120)}`);
    await screenshot("graph-queue");
    // `Open whole`: every token of the queue at that step, as JSON in an editor
    await side.locator("#open-queue").click();
    // (monaco draws spaces as no-break spaces: \s matches them)
    const whole = page.locator(".monaco-editor .view-lines", { hasText: /review\.Out->collect\.In\s+after\s+step\s+\d+\s+of\s+run/ }).first();
    await whole.waitFor({ timeout: 15000 });
    log(`  opened whole: ${(await whole.innerText()).split("\n")[0].slice(0, 120)}`);
  }, { critical: false });

  await stage("the timeline draws the firings, the loop's inner ones within its steps; a click on one selects it", async () => {
    await frame.locator('button[data-tab="timeline"]').click();
    await frame.locator("#tsvg rect.bar.inner").first().waitFor({ timeout: 15000 });
    const drawn = await frame.locator("#tsvg").evaluate((svg) => {
      const box = (r) => ({ step: Number(r.getAttribute("data-step")), last: Number(r.getAttribute("data-last-step")), inner: r.getAttribute("data-inner"),
        x: Number(r.getAttribute("x")), w: Number(r.getAttribute("width")), y: Number(r.getAttribute("y")) });
      const bars = [...svg.querySelectorAll("rect.bar:not(.current):not(.current-step)")].map(box);
      const top = bars.filter((b) => b.inner === "0");
      const inner = bars.filter((b) => b.inner !== "0");
      // (bars less than a pixel apart are drawn merged: an inner bar is within the bar of its steps)
      const outside = inner.filter((b) => !top.some((t) => t.step <= b.step && b.last <= t.last
        && b.x >= t.x - 1 && b.x + b.w <= t.x + t.w + 1 && b.y > t.y));
      return { top: top.length, inner: inner.length, outside: outside.length, cursor: svg.querySelectorAll("line.cursor").length,
        last: inner.at(-1) };
    });
    log(`  timeline: ${drawn.top} step bars, ${drawn.inner} inner bars (${drawn.outside} outside their step), ${await frame.locator("#tinfo").innerText()}`);
    check(drawn.top > 0 && drawn.inner > 0 && drawn.cursor === 1, `bars ${JSON.stringify(drawn)}`);
    check(drawn.outside === 0, `every inner firing's bar is under its step's bar, within it: ${drawn.outside} are not`);
    const { step, inner } = drawn.last;
    await frame.locator(`#tsvg rect.bar.inner[data-step="${step}"][data-inner="${inner}"]`).first().dispatchEvent("click");
    await waitStatus(new RegExp(`step ${step}/\\d+ · words › review · fire \\d+ \\(${inner}/\\d+\\)`), 15000);
    await frame.locator(`#tsvg rect.bar.inner.current[data-step="${step}"][data-inner="${inner}"]`).waitFor({ timeout: 10000 });
    await screenshot("graph-timeline");
    await frame.locator('button[data-tab="graph"]').click();
  }, { critical: false });

  await stage("the timeline gives a composite nested in a composite its own bar, what it ran in rows under it; a click selects it", async () => {
    await runCommand("View: Close All Editors"); // (the graph view too: flow.py's lens is then not the first)
    await openFile("nested.py", "@workflow");
    await clickRunLens(join(ws, "nested.py"));
    await waitStatus(/step [–\d]+\/4\b/, 45000); // the stepper on the new run
    await runCommand("Flowtape: Show Graph");
    frame = pageFrame(page);
    await frame.locator('g.actor[data-path="big/k"]').waitFor({ timeout: 30000 });
    await frame.locator('button[data-tab="timeline"]').click();
    await frame.locator("#tinfo", { hasText: /^4 steps/ }).waitFor({ timeout: 30000 }); // the run done: all of it drawn
    const drawn = await frame.locator("#tsvg").evaluate((svg) => [...svg.querySelectorAll("rect.bar.inner:not(.current):not(.current-step)")].map((r) => ({
      step: r.getAttribute("data-step"), inner: r.getAttribute("data-inner"), x: Number(r.getAttribute("x")), w: Number(r.getAttribute("width")),
      y: Number(r.getAttribute("y")), composite: r.classList.contains("composite"), actor: (r.querySelector("title")?.textContent ?? "").split(" · ")[2],
    })));
    const within = (a, b) => a && b && a.step === b.step && a.y > b.y && a.x >= b.x - 1 && a.x + a.w <= b.x + b.w + 1;
    const levels = drawn.filter((b) => b.actor === "big/k").map((k) => {
      const big = drawn.find((b) => b.actor === "big" && b.step === k.step);
      const c = drawn.find((b) => b.actor === "c" && b.step === k.step);
      return { k, big, c, ok: !!big?.composite && !!c?.composite && within(k, big) && within(big, c) };
    });
    log(`  nested timeline: ${drawn.length} inner bars, ${levels.filter((l) => l.ok).length} of ${levels.length} nested-workflow members under their workflow's bar under the if's; ${await frame.locator("#tinfo").innerText()}`);
    check(levels.length === 2 && levels.every((l) => l.ok), `each level's bar, under the one it ran in: ${JSON.stringify(levels)}`);
    const { step, inner } = levels[0].big;
    await frame.locator(`#tsvg rect.bar.inner[data-step="${step}"][data-inner="${inner}"]`).first().dispatchEvent("click");
    await waitStatus(new RegExp(`step ${step}/\\d+ · lp › big · fire \\d+ \\(${inner}/\\d+\\)`), 15000);
    await frame.locator(`#tsvg rect.bar.inner.current[data-step="${step}"][data-inner="${inner}"]`).waitFor({ timeout: 10000 });
    await frame.locator(`#tsvg rect.bar.inner.current-step[data-step="${step}"][data-inner="${levels[0].c.inner}"]`).waitFor({ timeout: 10000 }); // the if it ran in
    await screenshot("graph-timeline-nested");
    await frame.locator('button[data-tab="graph"]').click();
  }, { critical: false });
}
