-- The stepper: which run and step are "now", the steps the server streamed or paged in, and
-- what moving the step does (the cursor goes to the line that creates the step's actor, the
-- server is told so that hovers and inlay hints show that step).
local rpc = require("flowtape.rpc")

local M = {}

M.runs = {} -- runId -> { uri, workflow, steps = { [n] = StepInfo }, total, status, ours }
M.current = { run = nil, step = 0 }
local PAGE = 500
local QF_TITLE = "Flowtape steps"

function M.run(run_id)
  local run = M.runs[run_id]
  if not run then
    run = { steps = {}, total = 0, status = "running" }
    M.runs[run_id] = run
  end
  return run
end

function M.add_steps(run_id, steps)
  local run = M.run(run_id)
  local at_end = M.current.run == run_id and M.current.step == run.total
  for _, s in ipairs(steps) do
    run.steps[s.step] = s
    if s.step > run.total then
      run.total = s.step
    end
  end
  if at_end and run.ours then
    M.current.step = run.total -- a run you follow stays on its last step while it streams
  end
end

-- The step's StepInfo, from what was streamed or a page asked for around it.
function M.step_info(run_id, n)
  local run = M.run(run_id)
  if run.steps[n] then
    return run.steps[n]
  end
  local from = math.max(1, n - PAGE / 2)
  local page, err = rpc.request_sync("flowtape/getSteps", { runId = run_id, from = from, limit = PAGE })
  if not page then
    return nil, err
  end
  run.total = math.max(run.total, page.total or 0)
  for _, s in ipairs(page.steps or {}) do
    run.steps[s.step] = s
  end
  return run.steps[n]
end

function M.total(run_id)
  local run = M.run(run_id)
  if run.status == "running" or run.total == 0 then
    local page = rpc.request_sync("flowtape/getSteps", { runId = run_id, from = 1, limit = 1 })
    if page then
      run.total = math.max(run.total, page.total or 0)
    end
  end
  return run.total
end

-- The run the stepper is on: the one chosen or followed, else the latest run of this file.
function M.ensure_run(bufnr)
  if M.current.run then
    return M.current.run
  end
  local uri = vim.uri_from_bufnr(bufnr or 0)
  local listed, err = rpc.request_sync("flowtape/runs", { uri = uri })
  if not listed then
    error("Flowtape: " .. tostring(err), 0)
  end
  local latest = (listed.runs or {})[1]
  if not latest then
    error("Flowtape: this file has no runs yet (:FlowtapeRun)", 0)
  end
  M.current = { run = latest.runId, step = latest.steps }
  local run = M.run(latest.runId)
  run.uri, run.workflow, run.status = latest.uri, latest.workflow, latest.status
  run.total = math.max(run.total, latest.steps or 0)
  return latest.runId
end

local function jump(info)
  local path = vim.uri_to_fname(info.uri)
  local win = vim.api.nvim_get_current_win()
  if vim.bo[vim.api.nvim_win_get_buf(win)].buftype == "quickfix" then
    vim.cmd("wincmd p") -- (from the steps list: the step opens in the window it was called for)
    win = vim.api.nvim_get_current_win()
  end
  if vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ":p") ~= vim.fn.fnamemodify(path, ":p") then
    vim.cmd.edit(vim.fn.fnameescape(path))
  end
  local line = info.range.start.line + 1
  line = math.min(line, vim.api.nvim_buf_line_count(0))
  vim.api.nvim_win_set_cursor(win, { line, 0 })
end

function M.describe_step(info, total)
  local mark = info.replayed and " (replayed)" or ""
  local diverged = info.diverged and " · diverged" or ""
  return string.format("step %d/%d · %s ×%d%s%s", info.step, total, info.actor, info.fireCount, mark, diverged)
end

-- Move the stepper to step `n` (0 is before anything fired) of the current run.
function M.go(n)
  local run_id = M.ensure_run(0)
  local total = M.total(run_id)
  if total == 0 then
    error("Flowtape: run " .. run_id .. " has no steps", 0)
  end
  n = math.max(0, math.min(n, total))
  M.current.step = n
  rpc.notify("flowtape/selectStep", { runId = run_id, step = n })
  if n == 0 then
    vim.api.nvim_echo({ { string.format("Flowtape: step 0/%d · before anything fired", total) } }, false, {})
    return
  end
  local info, err = M.step_info(run_id, n)
  if not info then
    error("Flowtape: " .. tostring(err), 0)
  end
  jump(info)
  vim.api.nvim_echo({ { "Flowtape: " .. M.describe_step(info, total) } }, false, {})
end

function M.move(how)
  local run_id = M.ensure_run(0)
  local n = M.current.step
  if how == "next" then
    n = n + 1
  elseif how == "prev" then
    n = n - 1
  elseif how == "first" then
    n = 1
  elseif how == "last" then
    n = M.total(run_id)
  else
    n = tonumber(how)
    if not n then
      error("Flowtape: a step is next, prev, first, last or a number, not '" .. tostring(how) .. "'", 0)
    end
  end
  M.go(n)
end

-- Every step of the current run in the quickfix list (paged in from the server).
function M.to_quickfix()
  local run_id = M.ensure_run(0)
  local total = M.total(run_id)
  local items = {}
  local from = 1
  while from <= total do
    local page, err = rpc.request_sync("flowtape/getSteps", { runId = run_id, from = from, limit = 10000 }, 15000)
    if not page then
      error("Flowtape: " .. tostring(err), 0)
    end
    for _, s in ipairs(page.steps) do
      M.run(run_id).steps[s.step] = s
      table.insert(items, {
        filename = vim.uri_to_fname(s.uri),
        lnum = s.range.start.line + 1,
        col = 1,
        text = M.describe_step(s, total),
        type = s.diverged and "W" or "",
        user_data = { runId = run_id, step = s.step },
      })
    end
    if #page.steps == 0 then
      break
    end
    from = from + #page.steps
  end
  vim.fn.setqflist({}, "r", { title = QF_TITLE .. " · " .. run_id, items = items })
  return #items
end

-- The step the cursor is on: the quickfix entry under it in the steps list, else the stepper's.
function M.cursor_step()
  if vim.bo.buftype == "quickfix" then
    local list = vim.fn.getqflist({ title = 1, items = 1, idx = 0 })
    if vim.startswith(list.title or "", QF_TITLE) then
      local item = list.items[vim.fn.line(".")]
      if item and type(item.user_data) == "table" then
        return item.user_data.runId, item.user_data.step
      end
    end
  end
  return M.ensure_run(0), M.current.step
end

local function section(lines, title, entries, render)
  if entries and #entries > 0 then
    table.insert(lines, "")
    table.insert(lines, "## " .. title)
    for _, e in ipairs(entries) do
      table.insert(lines, render(e))
    end
  end
end

-- A float's buffer holds one line per entry: a value's own newlines would break it.
local function add_text(lines, prefix, text)
  local parts = vim.split(tostring(text), "\n", { plain = true })
  table.insert(lines, prefix .. parts[1])
  for i = 2, #parts do
    table.insert(lines, "  " .. parts[i])
  end
end

-- JSON's null arrives as vim.NIL, which is truthy.
local function given(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

-- An agent's firing: the question and the answer apart (a long question must not hide the
-- answer), then each model call with its tokens and latency.
local function chat_section(lines, entries)
  if not entries or #entries == 0 then
    return
  end
  table.insert(lines, "")
  table.insert(lines, "## Chat")
  for _, e in ipairs(entries) do
    local asked, answer = given(e.asked), given(e.answer)
    if not asked and not answer then
      add_text(lines, "- `" .. e.actor .. "`: ", e.chat)
    else
      table.insert(lines, "- `" .. e.actor .. "`")
      if asked then
        add_text(lines, "  asked: ", asked)
      end
      if answer then
        add_text(lines, "  answer: ", answer)
      end
    end
    for _, c in ipairs(given(e.calls) or {}) do
      table.insert(lines, string.format("  call: %s · %d in / %d out tokens · %d ms", c.model, c.inputTokens or 0, c.outputTokens or 0, c.ms or 0))
    end
  end
end

function M.detail_lines(d)
  local lines = {
    string.format("# Step %d · %s (%s) ×%d", d.step, d.actor, d.actorKind, d.fireCount),
    (d.replayed and "replayed from the tape" or "ran live") .. " · journal " .. tostring(d.journalSeq),
  }
  local function tokens(e)
    return "- `" .. e.queue .. "`: " .. table.concat(e.tokens or {}, ", ")
  end
  section(lines, "Took", d.taken, tokens)
  section(lines, "Put", d.put, tokens)
  section(lines, "Queues after", d.queues, function(e)
    return string.format("- `%s` (%d): %s", e.queue, e.size, table.concat(e.tokens or {}, ", "))
  end)
  section(lines, "States", d.states, function(e)
    return string.format("- `%s` ×%d: %s", e.actor, e.fireCount, e.state == vim.NIL and "—" or tostring(e.state or "—"))
  end)
  chat_section(lines, d.chat)
  return lines
end

-- The step's detail (what it took and put, queues, states) in a float beside the cursor.
function M.detail()
  local run_id, n = M.cursor_step()
  if n == 0 then
    error("Flowtape: step 0 is before anything fired: step forward first", 0)
  end
  local d, err = rpc.request_sync("flowtape/stepDetail", { runId = run_id, step = n })
  if not d then
    error("Flowtape: " .. tostring(err), 0)
  end
  local _, win = vim.lsp.util.open_floating_preview(M.detail_lines(d), "markdown", { border = "rounded", focus_id = "flowtape-step" })
  return win
end

function M.status()
  local run_id = M.current.run
  if not run_id then
    return ""
  end
  local run = M.runs[run_id]
  local info = run and run.steps[M.current.step]
  if info then
    return "flowtape " .. M.describe_step(info, run.total)
  end
  return string.format("flowtape step %d/%d", M.current.step, run and run.total or 0)
end

return M
