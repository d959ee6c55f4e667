-- The Flowtape language server as this plugin talks to it: finding the client, requests
-- (asynchronous and, for stepping, synchronous with a bound), commands and notifications.
-- Neovim 0.10 calls client methods with a dot, 0.11 with a colon: the difference lives here only.
local M = {}

M.NAME = "flowtape"
local NEW_API = vim.fn.has("nvim-0.11") == 1

function M.client(bufnr)
  local clients = vim.lsp.get_clients({ name = M.NAME, bufnr = bufnr })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = M.NAME })
  end
  return clients[1]
end

local function need_client()
  local client = M.client(0)
  if not client then
    error("Flowtape: the language server is not running (open a Python file of the workspace)", 0)
  end
  return client
end

-- An LSP error as the user should read it: its message, not a table.
function M.describe(err)
  if type(err) == "table" then
    return err.message or vim.inspect(err)
  end
  return tostring(err)
end

function M.request(method, params, on_result)
  local client = need_client()
  local handler = function(err, result)
    on_result(err, result)
  end
  if NEW_API then
    client:request(method, params, handler)
  else
    client.request(method, params, handler)
  end
end

-- A request answered before `timeout_ms`, or an error: for stepping, where the answer decides
-- where the cursor goes next.
function M.request_sync(method, params, timeout_ms)
  local client = need_client()
  local response, err
  if NEW_API then
    response, err = client:request_sync(method, params, timeout_ms or 5000)
  else
    response, err = client.request_sync(method, params, timeout_ms or 5000)
  end
  if not response then
    return nil, err or "no answer from the Flowtape server"
  end
  if response.err then
    return nil, M.describe(response.err)
  end
  return response.result, nil
end

function M.command(name, args, on_result)
  M.request("workspace/executeCommand", { command = name, arguments = { args } }, on_result)
end

function M.notify(method, params)
  local client = M.client(0)
  if not client then
    return
  end
  if NEW_API then
    client:notify(method, params)
  else
    client.notify(method, params)
  end
end

return M
