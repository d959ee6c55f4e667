#!/usr/bin/env bash
# Installs code-server 4.100.3 (= VS Code 1.100.3) offline into .cache/code-server, for the
# editor-client end-to-end test. Does nothing when it is already installed.
# Needs: Debian apt + npm registry (no GitHub downloads). Takes 2-3 minutes the first time.
set -euo pipefail

VERSION=4.100.3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/.cache/code-server"
PKG="$DEST/package"
STAMP="$DEST/.installed-$VERSION"

if [[ -f "$STAMP" && -f "$PKG/out/node/entry.js" ]]; then
  echo "code-server $VERSION already installed in $PKG"
  exit 0
fi

log() { echo "[install-code-server] $*"; }

need_apt=()
for p in build-essential pkg-config python3 libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev ripgrep chromium; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  log "apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

rm -rf "$DEST"
mkdir -p "$DEST"
cd "$DEST"
log "npm pack code-server@$VERSION"
npm pack "code-server@$VERSION" --silent >/dev/null
tar xzf "code-server-$VERSION.tgz"
rm -f "code-server-$VERSION.tgz"

export npm_config_nodedir=/usr
export npm_config_yes=true
export npm_config_audit=false
export npm_config_fund=false
export npm_config_update_notifier=false

cd "$PKG"
log "npm install (code-server)"
npm install --omit=dev --ignore-scripts --loglevel=error
log "npm rebuild argon2"
npm rebuild argon2 --loglevel=error

cd "$PKG/lib/vscode"
log "npm install (lib/vscode)"
npm install --omit=dev --ignore-scripts --loglevel=error
mkdir -p node_modules/@vscode/ripgrep/bin
ln -sfn /usr/bin/rg node_modules/@vscode/ripgrep/bin/rg
log "npm rebuild native modules"
npm rebuild kerberos @parcel/watcher @vscode/deviceid @vscode/spdlog native-watchdog node-pty --loglevel=error

log "postinstall steps"
ln -sfn node_modules node_modules.asar
(cd bin/remote-cli && ln -sfn code-linux.sh code-server)
(cd bin/helpers && ln -sfn browser-linux.sh browser.sh)
(cd extensions && npm install --omit=dev --ignore-scripts --loglevel=error)

version_line="$(XDG_CONFIG_HOME="$DEST/.config" node "$PKG/out/node/entry.js" --version 2>/dev/null | tail -n 1)"
[[ "$version_line" == "$VERSION "* ]] || { echo "code-server check failed: '$version_line'" >&2; exit 1; }
log "check: $version_line"
touch "$STAMP"
log "done: $PKG"
