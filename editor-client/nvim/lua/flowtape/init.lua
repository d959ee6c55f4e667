-- Flowtape for Neovim (>= 0.10): the language server (`python -m flowtape lsp`) on Python files,
-- and commands to run a flow, step through its tape, see a step's detail, resume at a step,
-- rerun the actor on the cursor line and stop a run. See editor-client/nvim/README.md.
local rpc = require("flowtape.rpc")
local stepper = require("flowtape.stepper")

local M = {}

M.defaults = {
  python = nil, -- the interpreter that has flowtape; default: $VIRTUAL_ENV's, g:python3_host_prog, python3
  cmd = nil, -- the whole server command, instead of { python, "-m", "flowtape", "lsp" }
  root_markers = { ".flowtape", "pyproject.toml", "setup.py", ".git" },
  max_workers = nil, -- for runs started here (1: a deterministic order)
  keys = {
    next = "]t",
    prev = "[t",
    detail = "<leader>td",
    run = "<leader>tr",
    resume = "<leader>tR",
    rerun = "<leader>ta",
    stop = "<leader>ts",
    steps = "<leader>tq",
  },
}
M.options = vim.deepcopy(M.defaults)
local ours = {} -- run ids started from this Neovim: followed, and their finish reported

local function say(message, level)
  vim.notify(message, level or vim.log.levels.INFO, { title = "Flowtape" })
end

-- Run `fn`, reporting a Lua error as a message instead of a stack trace.
local function guarded(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then
      say(tostring(err), vim.log.levels.ERROR)
    end
  end
end

local function python()
  local o = M.options
  if o.python then
    return o.python
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and vim.fn.executable(venv .. "/bin/python") == 1 then
    return venv .. "/bin/python"
  end
  return vim.g.python3_host_prog or "python3"
end

local function preview(value)
  local ok, text = pcall(vim.json.encode, value)
  text = ok and text or vim.inspect(value)
  if #text > 300 then
    text = text:sub(1, 299) .. "…"
  end
  return text
end

function M.finish_message(p)
  local parts = { string.format("%s %s · %d step%s", p.runId, p.status, p.steps or 0, p.steps == 1 and "" or "s") }
  if p.error then
    table.insert(parts, p.error)
  end
  local ports = vim.tbl_keys(p.outputs or {})
  table.sort(ports)
  for _, port in ipairs(ports) do
    table.insert(parts, port .. ": " .. preview(p.outputs[port]))
  end
  if p.replayStopped and #p.replayStopped > 0 then
    local d = p.replayStopped[1]
    table.insert(parts, string.format("replay stopped at %s firing %d: %s", d.actor, d.fireCount, d.reason))
  end
  return table.concat(parts, "\n")
end

local function follow(result)
  if result and result.runId then
    ours[result.runId] = true
    stepper.run(result.runId).ours = true
    stepper.current = { run = result.runId, step = 0 }
    say("started " .. result.runId)
  end
end

-- A server command that starts a run: followed, and its finish reported with its outputs.
local function start(name, args)
  rpc.command(name, args, function(err, result)
    if err then
      say(name .. ": " .. rpc.describe(err), vim.log.levels.ERROR)
    else
      follow(result)
    end
  end)
end

local LEVELS = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }

M.handlers = {
  -- the server's messages (the runs a "Runs (n)" lens lists) reach the user as the plugin's own do
  ["window/showMessage"] = function(_, p)
    say(p.message, LEVELS[p.type] or vim.log.levels.INFO)
  end,
  ["flowtape/runStarted"] = function(_, p)
    local run = stepper.run(p.runId)
    run.uri, run.workflow = p.uri, p.workflow
  end,
  ["flowtape/steps"] = function(_, p)
    stepper.add_steps(p.runId, p.steps or {})
  end,
  ["flowtape/runFinished"] = function(_, p)
    local run = stepper.run(p.runId)
    run.status, run.total = p.status, math.max(run.total, p.steps or 0)
    run.outputs = p.outputs
    if ours[p.runId] then
      say(M.finish_message(p), p.status == "failed" and vim.log.levels.ERROR or vim.log.levels.INFO)
    end
    vim.schedule(function()
      pcall(vim.lsp.codelens.refresh, { bufnr = 0 })
    end)
  end,
}

function M.start_server(bufnr)
  local fname = vim.api.nvim_buf_get_name(bufnr)
  local root = vim.fs.root(fname, M.options.root_markers) or vim.fn.getcwd()
  return vim.lsp.start({
    name = rpc.NAME,
    cmd = M.options.cmd or { python(), "-m", "flowtape", "lsp" },
    root_dir = root,
    handlers = M.handlers,
    -- a plain client: every lens carries a server command (docs/protocol.md)
    init_options = vim.empty_dict(),
  }, { bufnr = bufnr })
end

local function workers(args)
  if M.options.max_workers then
    args.maxWorkers = M.options.max_workers
  end
  return args
end

function M.run(workflow, inputs_json)
  local args = workers({ uri = vim.uri_from_bufnr(0) })
  if workflow and workflow ~= "" then
    args.workflow = workflow
  end
  if inputs_json and inputs_json ~= "" then
    local ok, inputs = pcall(vim.json.decode, inputs_json)
    if not ok or type(inputs) ~= "table" then
      error("Flowtape: inputs must be a JSON object, e.g. {\"Topic\": \"tapes\"}", 0)
    end
    args.inputs = inputs
  end
  start("flowtape.run", args)
end

function M.resume(step)
  local run_id, at = stepper.cursor_step()
  start("flowtape.resumeAtStep", { runId = run_id, step = step or at })
end

function M.rerun_actor()
  local run_id = stepper.ensure_run(0)
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  start("flowtape.rerunActor", { runId = run_id, uri = vim.uri_from_bufnr(0), line = line })
end

function M.stop()
  local target
  for run_id in pairs(ours) do
    if stepper.run(run_id).status == "running" then
      target = run_id
    end
  end
  target = target or stepper.current.run
  if not target then
    error("Flowtape: no run to stop", 0)
  end
  rpc.command("flowtape.stop", { runId = target }, function(err, result)
    if err then
      say("stop: " .. rpc.describe(err), vim.log.levels.ERROR)
    elseif result then
      say(result.stopped and (target .. " stopped") or (target .. " had already " .. result.status))
    end
  end)
end

function M.status()
  return stepper.status()
end

local function map_keys(bufnr)
  local keys = M.options.keys
  if not keys then
    return
  end
  local function map(lhs, fn, desc)
    if lhs then
      vim.keymap.set("n", lhs, guarded(fn), { buffer = bufnr, desc = "Flowtape: " .. desc })
    end
  end
  map(keys.next, function() stepper.move("next") end, "next step")
  map(keys.prev, function() stepper.move("prev") end, "previous step")
  map(keys.detail, stepper.detail, "step detail")
  map(keys.run, function() M.run() end, "run this flow")
  map(keys.resume, function() M.resume() end, "resume at the stepper's step")
  map(keys.rerun, M.rerun_actor, "rerun the actor on this line")
  map(keys.stop, M.stop, "stop the run")
  map(keys.steps, function() stepper.to_quickfix(); vim.cmd.copen() end, "steps in the quickfix list")
end

local function user_commands()
  local function cmd(name, fn, opts)
    vim.api.nvim_create_user_command(name, guarded(fn), opts or {})
  end
  cmd("FlowtapeRun", function(o)
    M.run(o.fargs[1], table.concat(vim.list_slice(o.fargs, 2), " "))
  end, { nargs = "*", desc = "Run the flow of this file: [workflow] [inputs as JSON]" })
  cmd("FlowtapeStep", function(o) stepper.move(o.args ~= "" and o.args or "next") end, {
    nargs = "?",
    complete = function() return { "next", "prev", "first", "last" } end,
    desc = "Move the stepper: next, prev, first, last or a step number",
  })
  cmd("FlowtapeSteps", function()
    stepper.to_quickfix()
    vim.cmd.copen()
  end, { desc = "Every step of the run in the quickfix list" })
  cmd("FlowtapeDetail", stepper.detail, { desc = "The step's detail in a float" })
  cmd("FlowtapeResume", function(o) M.resume(tonumber(o.args)) end, { nargs = "?", desc = "Resume at the cursor's step (or N)" })
  cmd("FlowtapeRerun", M.rerun_actor, { desc = "Rerun the actor created on the cursor line" })
  cmd("FlowtapeStop", M.stop, { desc = "Stop the run started here" })
  cmd("FlowtapeRuns", function()
    local listed, err = rpc.request_sync("flowtape/runs", { uri = vim.uri_from_bufnr(0) })
    if not listed then
      error("Flowtape: " .. tostring(err), 0)
    end
    vim.ui.select(listed.runs, {
      prompt = "Flowtape run",
      format_item = function(r) return string.format("%s  %s · %d steps", r.runId, r.status, r.steps) end,
    }, function(r)
      if r then
        stepper.current = { run = r.runId, step = r.steps }
        stepper.go(r.steps)
      end
    end)
  end, { desc = "Choose the run to step through" })
end

function M.setup(opts)
  if vim.fn.has("nvim-0.10") ~= 1 then
    say("flowtape.nvim needs Neovim 0.10 or newer (vim.lsp.start, inlay hints); this is " .. tostring(vim.version()),
      vim.log.levels.ERROR)
    return
  end
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if opts and opts.keys == false then
    M.options.keys = false
  end
  user_commands()
  -- A lens that starts a run is run here, so that the run is followed like one started by a command.
  vim.lsp.commands["flowtape.run"] = function(command) start(command.command, command.arguments[1]) end
  vim.lsp.commands["flowtape.resumeAtStep"] = function(command) start(command.command, command.arguments[1]) end
  local group = vim.api.nvim_create_augroup("flowtape", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = "python",
    callback = function(ev)
      M.start_server(ev.buf)
      map_keys(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == rpc.NAME then
        pcall(vim.lsp.inlay_hint.enable, true, { bufnr = ev.buf })
        pcall(vim.lsp.codelens.refresh, { bufnr = ev.buf })
      end
    end,
  })
  -- Neovim does not declare codeLens refresh support: lenses are asked for again here.
  vim.api.nvim_create_autocmd({ "BufEnter", "CursorHold", "InsertLeave" }, {
    group = group,
    pattern = "*.py",
    callback = function(ev)
      if rpc.client(ev.buf) then
        pcall(vim.lsp.codelens.refresh, { bufnr = ev.buf })
      end
    end,
  })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = "qf",
    callback = function(ev)
      vim.keymap.set("n", "<CR>", guarded(function()
        local run_id, step = stepper.cursor_step()
        if vim.startswith(vim.fn.getqflist({ title = 1 }).title or "", "Flowtape steps") then
          stepper.current.run = run_id
          stepper.go(step)
        else
          vim.cmd("execute \"normal! \\<CR>\"")
        end
      end), { buffer = ev.buf, desc = "Flowtape: go to this step" })
    end,
  })
end

return M
