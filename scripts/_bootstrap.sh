# Sourced by the scripts in this folder: finds Python >= 3.12, makes .venv,
# installs the project into it when pyproject.toml changed, and activates it.
#
# It installs with uv: the one on PATH, else one it keeps in a small tools venv
# of its own (fetched once from the package index with pip), else, if neither
# works, with pip (slower; it says so). Both install the versions pinned in
# pyproject.toml's [tool.uv] constraint-dependencies (scripts/lock writes them).
#
# Settings: PAIL_PYTHON chooses the interpreter; PAIL_EXTRAS the extras
# (comma-separated; default: every extra); PAIL_INSTALLER=pip skips uv;
# PAIL_TOOLS is where uv is kept (default ~/.cache/pail/tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${PAIL_EXTRAS:-}"
TOOLS="${PAIL_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/pail/tools}"
# uv never downloads an interpreter: it uses the one find_python chose.
export UV_PYTHON_DOWNLOADS=never
# A machine that gives pip a certificate bundle (a TLS proxy's CA, say) gives it to uv too.
if [ -z "${SSL_CERT_FILE:-}" ] && [ -n "${PIP_CERT:-}" ]; then
    export SSL_CERT_FILE="$PIP_CERT"
fi

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

# Prints the path of a working uv, getting one into $TOOLS if there is none; fails if it can't.
find_uv() {
    local python="$1"
    if command -v uv >/dev/null 2>&1 && uv --version >/dev/null 2>&1; then
        command -v uv
        return 0
    fi
    if [ -x "$TOOLS/bin/uv" ] && "$TOOLS/bin/uv" --version >/dev/null 2>&1; then
        echo "$TOOLS/bin/uv"
        return 0
    fi
    echo "==> getting uv from the package index into $TOOLS (once)" >&2
    rm -rf "$TOOLS"
    if "$python" -m venv "$TOOLS" >&2 &&
        "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check uv >&2 &&
        "$TOOLS/bin/uv" --version >/dev/null 2>&1; then
        echo "$TOOLS/bin/uv"
        return 0
    fi
    return 1
}

# The extras to install, one per line: PAIL_EXTRAS, else every extra pyproject.toml declares.
_extras() {
    if [ -n "$EXTRAS" ]; then
        tr ',' '\n' <<<"$EXTRAS"
    else
        "$1" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]))' \
            "$ROOT/pyproject.toml"
    fi
}

_install_with_uv() {
    local uv="$1" extras=() extra
    while read -r extra; do extras+=(--extra "$extra"); done < <(_extras "$VENV/bin/python")
    # uv sync resolves under the pins of [tool.uv] constraint-dependencies, writes the
    # (untracked) uv.lock, and makes .venv exactly that set, the project editable.
    (cd "$ROOT" && UV_PROJECT_ENVIRONMENT="$VENV" "$uv" sync --quiet --python "$VENV/bin/python" "${extras[@]}")
}

_install_with_pip() {
    local pins extras
    pins="$VENV/.pail-pins.txt"
    # The same pins, as a pip constraints file.
    "$VENV/bin/python" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["tool"]["uv"]["constraint-dependencies"]))' \
        "$ROOT/pyproject.toml" >"$pins"
    extras="$(_extras "$VENV/bin/python" | paste -sd, -)"
    # A .venv that uv made has no pip of its own.
    "$VENV/bin/python" -m pip --version >/dev/null 2>&1 || "$VENV/bin/python" -m ensurepip --upgrade >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$pins" -e "$ROOT[$extras]" >&2
}

ensure_venv() {
    local stamp="$VENV/.pail-installed" want
    want="$(sha256sum <"$ROOT/pyproject.toml" | cut -c1-16)-${EXTRAS:-all}"
    if [ -x "$VENV/bin/python" ] && _python_ok "$VENV/bin/python" &&
        [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        _activate  # nothing changed: no installer runs
        return 0
    fi
    local python uv="" installer="pip"
    python="$(find_python)"
    if [ "${PAIL_INSTALLER:-uv}" != pip ]; then
        if uv="$(find_uv "$python")"; then
            installer="uv"
        else
            echo "==> uv is not available (not on PATH, and 'pip install uv' failed): installing with pip instead (slower, the same pinned versions)" >&2
        fi
    fi
    if [ ! -x "$VENV/bin/python" ] || ! _python_ok "$VENV/bin/python"; then
        echo "==> creating .venv with $python ($("$python" -V 2>&1))" >&2
        rm -rf "$VENV"
        if [ "$installer" = uv ]; then
            "$uv" venv --quiet --python "$python" "$VENV" >&2
        else
            "$python" -m venv "$VENV"
        fi
    fi
    echo "==> installing pail (extras: ${EXTRAS:-all}) into .venv with $installer" >&2
    if [ "$installer" = uv ]; then
        _install_with_uv "$uv"
    else
        _install_with_pip
    fi
    echo "$want" >"$stamp"
    _activate
}

_activate() {
    export PATH="$VENV/bin:$PATH"
    export VIRTUAL_ENV="$VENV"
}
