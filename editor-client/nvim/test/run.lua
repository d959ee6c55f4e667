-- The Neovim plugin's end-to-end test: a real headless Neovim, the real language server
-- (FLOWTAPE_PYTHON -m flowtape lsp), real flows run in a scratch workspace. Each check prints
-- "ok - …" or "not ok - …"; the last line counts them; the exit code is 1 if any failed.
--   nvim --headless -u NONE -i NONE -c "luafile editor-client/nvim/test/run.lua"
local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
vim.opt.runtimepath:prepend(vim.fn.fnamemodify(here, ":h"))
vim.cmd("filetype on")
vim.o.shortmess = vim.o.shortmess .. "F"

local PY = assert(vim.env.FLOWTAPE_PYTHON, "set FLOWTAPE_PYTHON to the interpreter that has flowtape")
local ws = vim.fn.tempname()
vim.fn.mkdir(ws, "p")
vim.fn.writefile({}, ws .. "/pyproject.toml")
vim.fn.chdir(ws)

local COUNT = [[
import time

from flowtape import Port, connect, task, workflow


@task
class Count:
    class Ports:
        Out = Port[int](direction="out")

    n: int
    delay: float
    i: int = 0

    def action(self):
        if self.i >= self.n:
            return None
        time.sleep(self.delay)
        self.i += 1
        return self.i


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    total: int = 0

    def action(self, x):
        if x == FAIL_AT:
            raise ValueError("two is not allowed")
        self.total += x
        return x * 2


@workflow
def main():
    count = Count(n=N, delay=DELAY)
    double = Double()
    connect(count.Out, double.In)
    connect(double.Out, "Result")
]]

local function write_flow(name, n, delay, fail_at)
  local text = COUNT:gsub("FAIL_AT", tostring(fail_at)):gsub("N, delay=DELAY", n .. ", delay=" .. delay)
  vim.fn.writefile(vim.split(text, "\n"), ws .. "/" .. name)
  return ws .. "/" .. name
end

local function line_of(path, needle)
  for i, l in ipairs(vim.fn.readfile(path)) do
    if l:find(needle, 1, true) then
      return i
    end
  end
end

local messages = {}
vim.notify = function(msg, level)
  table.insert(messages, { msg = tostring(msg), level = level or vim.log.levels.INFO })
end
local picked
vim.ui.select = function(items, opts, on_choice)
  for _, item in ipairs(items) do
    local label = (opts.format_item or tostring)(item)
    if picked and label:find(picked, 1, true) then
      return on_choice(item)
    end
  end
  on_choice(nil)
end

assert(vim.fn.has("nvim-0.10") == 1, "the plugin's test needs Neovim >= 0.10, this is " .. tostring(vim.version()))
local passed, failed = 0, 0
local function check(name, fn)
  local ok, err = pcall(fn)
  if ok then
    passed = passed + 1
    io.stdout:write("ok - " .. name .. "\n")
  else
    failed = failed + 1
    io.stdout:write("not ok - " .. name .. ": " .. tostring(err) .. "\n")
  end
end

local function wait(ms, pred, what)
  if not vim.wait(ms, pred, 20) then
    error("timed out waiting for " .. what, 2)
  end
end

local function message_matching(pattern, from)
  for i = from or 1, #messages do
    if messages[i].msg:find(pattern) then
      return messages[i]
    end
  end
end

local function message_with(text, from)
  for i = from or 1, #messages do
    if messages[i].msg:find(text, 1, true) then
      return messages[i]
    end
  end
end

local function lens_titles()
  local titles = {}
  for _, lens in ipairs(vim.lsp.codelens.get(0)) do
    table.insert(titles, lens.command and lens.command.title or "?")
  end
  return titles
end

local function wait_lenses(want)
  wait(10000, function()
    vim.lsp.codelens.refresh({ bufnr = 0 })
    vim.wait(100)
    return vim.deep_equal(lens_titles(), want)
  end, "lenses " .. vim.inspect(want) .. " (got " .. vim.inspect(lens_titles()) .. ")")
end

local function hint_labels()
  local labels = {}
  for _, h in ipairs(vim.lsp.inlay_hint.get({ bufnr = 0 })) do
    local label = h.inlay_hint.label
    if type(label) == "table" then
      local parts = {}
      for _, p in ipairs(label) do
        table.insert(parts, p.value)
      end
      label = table.concat(parts)
    end
    table.insert(labels, { line = h.inlay_hint.position.line + 1, label = label })
  end
  return labels
end

local function hint_on(line, needle)
  for _, h in ipairs(hint_labels()) do
    if h.line == line and h.label:find(needle, 1, true) then
      return true
    end
  end
  return false
end

local flowtape = require("flowtape")
local stepper = require("flowtape.stepper")
flowtape.setup({ python = PY, max_workers = 1 })

local count = write_flow("count.py", 4, 0, -1)
local count_line = line_of(count, "count = Count(")
local double_line = line_of(count, "double = Double()")
local first_run

-- Run the last started run to its end; its finish message.
local function finished(from, what)
  local found
  wait(30000, function()
    found = message_matching(" (%a+) · %d+ step", from)
    return found ~= nil
  end, what)
  return found
end

local function run_of(message)
  return message.msg:match("^(%S+)")
end

check("the server attaches to a Python file", function()
  vim.cmd.edit(count)
  wait(15000, function()
    local c = require("flowtape.rpc").client(0)
    return c ~= nil and c.initialized
  end, "the flowtape client")
end)

check(":FlowtapeRun runs the flow and echoes its outputs", function()
  local from = #messages + 1
  vim.cmd("FlowtapeRun")
  local done = finished(from, "the run's finish")
  assert(done.msg:find("succeeded · 8 steps", 1, true), done.msg)
  assert(done.msg:find("Result: [2,4,6,8]", 1, true), done.msg)
  first_run = run_of(done)
end)

check("plain lenses: ▶ Run and Runs (n), no resume without a step", function()
  wait_lenses({ "▶ Run", "Runs (1)" })
end)

check("the Runs (n) lens shows the runs (flowtape.showRuns)", function()
  local from = #messages + 1
  vim.api.nvim_win_set_cursor(0, { line_of(count, "@workflow"), 0 })
  picked = "Runs (1)"
  vim.lsp.codelens.run()
  wait(10000, function() return message_matching("1 run of main", from) ~= nil end, "the runs message")
  assert(message_with(first_run, from), "the message names the run")
end)

check(":FlowtapeSteps puts every step in the quickfix list", function()
  vim.cmd("FlowtapeSteps")
  local list = vim.fn.getqflist({ title = 1, items = 1 })
  assert(#list.items == 8, "8 steps, got " .. #list.items)
  assert(list.title:find(first_run, 1, true), list.title)
  assert(list.items[1].text:find("step 1/8 · count ×1", 1, true), list.items[1].text)
  vim.cmd.cclose()
end)

check("stepping jumps to the actor's line and moves the inlay hints", function()
  vim.cmd.edit(count)
  vim.cmd("FlowtapeStep first")
  assert(vim.api.nvim_win_get_cursor(0)[1] == count_line, "cursor on count's line")
  wait(10000, function() return hint_on(count_line, "×1") end, "hint ×1 on count's line")
  vim.cmd("FlowtapeStep next")
  assert(vim.api.nvim_win_get_cursor(0)[1] == double_line, "cursor on double's line")
  vim.cmd("FlowtapeStep last")
  assert(vim.api.nvim_win_get_cursor(0)[1] == double_line, "the last step is double's")
  wait(10000, function() return hint_on(double_line, "×4") end, "hint ×4 on double's line")
  vim.cmd("FlowtapeStep prev")
  wait(10000, function() return hint_on(double_line, "×3") end, "hint ×3 on double's line")
  assert(flowtape.status():find("step 7/8", 1, true), flowtape.status())
end)

check(":FlowtapeDetail shows the step's detail in a float", function()
  vim.cmd("FlowtapeStep 4")
  local before = #vim.api.nvim_list_wins()
  vim.cmd("FlowtapeDetail")
  assert(#vim.api.nvim_list_wins() == before + 1, "a float opened")
  local float
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= "" then
      float = w
    end
  end
  assert(float, "a floating window")
  local text = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(float), 0, -1, false), "\n")
  assert(text:find("Step 4 · double", 1, true), text)
  assert(text:find("Took", 1, true) and text:find("count.Out->double.In", 1, true), text)
  vim.api.nvim_win_close(float, true)
end)

check("the resume lens names the selected step and resumes there", function()
  vim.cmd("FlowtapeStep 3")
  vim.cmd.edit(count)
  wait_lenses({ "▶ Run", "⟲ Resume at step 3", "Runs (1)" })
  local from = #messages + 1
  vim.api.nvim_win_set_cursor(0, { line_of(count, "@workflow"), 0 })
  picked = "Resume at step 3"
  vim.lsp.codelens.run()
  local done = finished(from, "the resumed run's finish")
  assert(done.msg:find("succeeded · 8 steps", 1, true), done.msg)
  local run = stepper.runs[run_of(done)]
  for n = 1, 8 do
    assert(run.steps[n], "step " .. n .. " was streamed")
    assert(run.steps[n].replayed == (n <= 3), "step " .. n .. " replayed is " .. tostring(run.steps[n].replayed))
  end
end)

check(":FlowtapeResume in the steps list resumes at the entry under the cursor", function()
  stepper.current = { run = first_run, step = 8 }
  vim.cmd("FlowtapeSteps")
  vim.cmd.copen()
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  local from = #messages + 1
  vim.cmd("FlowtapeResume")
  local done = finished(from, "the resumed run's finish")
  local run = stepper.runs[run_of(done)]
  assert(run.steps[2].replayed and not run.steps[3].replayed, "resumed at step 2")
  vim.cmd.cclose()
end)

check(":FlowtapeRerun reruns the actor on the cursor line", function()
  stepper.current = { run = first_run, step = 8 }
  vim.cmd.edit(count)
  vim.api.nvim_win_set_cursor(0, { double_line, 0 })
  local from = #messages + 1
  vim.cmd("FlowtapeRerun")
  local done = finished(from, "the rerun's finish")
  local run = stepper.runs[run_of(done)]
  assert(run.steps[7].replayed and not run.steps[8].replayed, "only double's last firing ran again")
end)

check(":FlowtapeDetail of an agent's step shows what it asked and what it answered", function()
  local path = ws .. "/ask.py"
  vim.fn.writefile({
    "from flowtape import Port, agent, connect, workflow",
    "",
    "",
    '@agent(prompt="Name a colour", transport="mock", mock_outputs={"Colour": "teal"}, fireable_without_input=1)',
    "class Namer:",
    "    class Ports:",
    '        Colour = Port[str](direction="out")',
    "",
    "",
    "@workflow",
    "def main():",
    "    namer = Namer()",
    '    connect(namer.Colour, "Colours")',
  }, path)
  vim.cmd.edit(path)
  wait(15000, function() return require("flowtape.rpc").client(0) ~= nil end, "attach")
  local from = #messages + 1
  vim.cmd("FlowtapeRun")
  finished(from, "the agent's run")
  vim.cmd("FlowtapeStep 1")
  local lines = stepper.detail_lines(assert(require("flowtape.rpc").request_sync("flowtape/stepDetail", { runId = stepper.current.run, step = 1 })))
  local text = table.concat(lines, "\n")
  assert(text:find("## Chat", 1, true), text)
  assert(text:find("asked: ", 1, true) and text:find("Name a colour", 1, true), text)
  assert(text:find("answer: ", 1, true) and text:find("teal", 1, true), text)
  for _, l in ipairs(lines) do
    assert(not l:find("\n", 1, true), "one line per buffer line: " .. l)
  end
end)

check("a failed run is reported as an error, and its lens resumes at its last step", function()
  local fail = write_flow("fail.py", 3, 0, 2)
  vim.cmd.edit(fail)
  wait(15000, function() return require("flowtape.rpc").client(0) ~= nil end, "attach")
  local from = #messages + 1
  vim.cmd("FlowtapeRun")
  local done = finished(from, "the failed run")
  assert(done.level == vim.log.levels.ERROR, "reported as an error")
  assert(done.msg:find("failed", 1, true) and done.msg:find("two is not allowed", 1, true), done.msg)
  local steps = tonumber(done.msg:match("· (%d+) step"))
  wait_lenses({ "▶ Run", "⟲ Resume at step " .. steps, "Runs (1)" })
end)

check(":FlowtapeStop stops a running flow", function()
  local slow = write_flow("slow.py", 50, 0.2, -1)
  vim.cmd.edit(slow)
  local from = #messages + 1
  vim.cmd("FlowtapeRun")
  wait(15000, function() return message_matching("^started ", from) ~= nil end, "the run to start")
  local id = message_matching("^started ", from).msg:match("started (%S+)")
  wait(15000, function() return stepper.runs[id] and stepper.runs[id].total >= 2 end, "a few steps")
  vim.cmd("FlowtapeStop")
  local done = finished(from, "the stopped run")
  assert(done.msg:find("stopped", 1, true), done.msg)
  wait(5000, function() return message_with(id .. " stopped", from) ~= nil end, "the stop's answer")
end)

check("bad input gets a clear message, not a stack trace", function()
  vim.cmd.edit(count)
  local from = #messages + 1
  vim.cmd("FlowtapeStep sideways")
  local m = message_matching("a step is next, prev, first, last or a number", from)
  assert(m and m.level == vim.log.levels.ERROR, "step refused")
  vim.cmd("FlowtapeRun main {not json")
  assert(message_matching("inputs must be a JSON object", from), "inputs refused")
  stepper.current = { run = "no-such-run", step = 1 }
  vim.cmd("FlowtapeDetail")
  assert(message_with("no-such-run", from), vim.inspect(messages[#messages]))
  for i = from, #messages do
    assert(not messages[i].msg:find("stack traceback", 1, true), messages[i].msg)
  end
  stepper.current = { run = nil, step = 0 }
end)

io.stdout:write(string.format("%d passed, %d failed\n", passed, failed))
vim.lsp.stop_client(vim.lsp.get_clients(), true)
vim.cmd(failed == 0 and "qa!" or "cquit 1")
