"""The Flowtape language server (`flowtape lsp`); see docs/protocol.md."""
