# Sourced by the scripts in this folder: finds Python >= 3.12, makes .venv,
# installs the project into it when pyproject.toml changed, and activates it.
# Set PAIL_PYTHON to choose the interpreter yourself.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${PAIL_EXTRAS:-local,lambda,infra,dev}"

_python_ok() {
    "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local candidate
    for candidate in "${PAIL_PYTHON:-}" python3.13 python3.12 \
        "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3 \
        /usr/local/bin/python3.13 /usr/local/bin/python3.12 /usr/bin/python3.13 /usr/bin/python3.12 \
        python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 && _python_ok "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done
    echo "error: pail needs Python >= 3.12 with the venv module, and none was found." >&2
    echo "       Install one (for example 'pyenv install 3.12') or set PAIL_PYTHON=/path/to/python3.12." >&2
    return 1
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ] || ! _python_ok "$VENV/bin/python"; then
        local python
        python="$(find_python)"
        echo "==> creating .venv with $python ($("$python" -V 2>&1))" >&2
        rm -rf "$VENV"
        "$python" -m venv "$VENV"
    fi
    local stamp="$VENV/.pail-installed"
    local want
    want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)-$EXTRAS"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "==> installing pail[$EXTRAS] into .venv" >&2
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[$EXTRAS]" >&2
        echo "$want" >"$stamp"
    fi
    export PATH="$VENV/bin:$PATH"
    export VIRTUAL_ENV="$VENV"
}
