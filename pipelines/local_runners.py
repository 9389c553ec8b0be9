"""Real Beam runners for local runs and tests, built from public registries into okl's cache.

Two runners are not part of the ``apache-beam`` wheel and are fetched here, once, into
``<cache>/runners/`` (the cache is ``$OKL_CACHE`` or ``~/.cache/okl``, as for downloads):

**Prism**, Beam's Go runner, is built from the Go module proxy with ``go install``, at the
version of the installed ``apache-beam`` (Beam's own PrismRunner downloads it from GitHub
instead)::

    <cache>/runners/prism-v2.77.0/prism

Use it with ``--runner=PrismRunner --prism_location=PATH``. When the proxy does not
serve that exact version, the nearest released version it serves is built instead (and
a log line says so).

**A Flink job server**, as a *pathing jar*: an almost empty jar whose manifest names the
job server's main class (:data:`FLINK_MAIN_CLASS`) and a ``Class-Path`` of the Beam Flink
runner's jars, fetched from Maven Central with ``mvn dependency:copy-dependencies``.
Beam's shaded ``beam-runners-flink-<flink>-job-server`` jar is not needed (nor always
served). ``java -jar`` starts it as it starts the published jar, so Beam's Python
``FlinkRunner`` takes it as ``--flink_job_server_jar=PATH``::

    <cache>/runners/flink-1.19-job-server-2.62.0/beam-runners-flink-1.19-job-server-2.62.0.jar
    <cache>/runners/flink-1.19-job-server-2.62.0/lib/*.jar

Its Beam version (:data:`FLINK_BEAM_VERSION`) is the newest whose Flink runner resolves
completely from Maven Central; the Python SDK that submits jobs to it must have the same
version (``make runners`` builds ``.venv-flink`` with it). The manifest also opens the JDK
packages Flink reflects into (``Add-Opens``, as Flink's own ``env.java.opts.all`` does),
so that the job server runs on Java 17 and later with no JVM flags, and a
``simplelogger.properties`` keeps the job server's log at warnings.

From the command line (what ``make runners`` calls; :mod:`pipelines.engines`)::

    python -m pipelines.engines install prism     # or: flink, all
    python -m pipelines.engines path prism        # print the cached path (exit 1 when absent)
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import tempfile
import zipfile

from okl_core.data.download import default_cache_dir

__all__ = [
    "FLINK_BEAM_VERSION",
    "FLINK_VERSION",
    "FLINK_MAIN_CLASS",
    "FLINK_JVM_OPENS",
    "FLINK_JVM_EXPORTS",
    "EngineUnavailable",
    "beam_version",
    "runners_dir",
    "prism_binary",
    "flink_job_server_jar",
    "flink_runner_options",
    "RUNNERS",
]

_LOG = logging.getLogger(__name__)

PRISM_MODULE = "github.com/apache/beam/sdks/v2"
PRISM_PACKAGE = PRISM_MODULE + "/go/cmd/prism"

FLINK_VERSION = "1.19"
"""Flink version of the job server (the Flink runner artifact ``beam-runners-flink-1.19``)."""
FLINK_BEAM_VERSION = "2.62.0"
"""Beam version of the job server; the submitting Python SDK must have the same version."""
FLINK_MAIN_CLASS = "org.apache.beam.runners.flink.FlinkJobServerDriver"
"""Main class of Beam's Flink job server (the published job-server jar's ``Main-Class``)."""
FLINK_JVM_OPENS = tuple(
    "java.base/" + package
    for package in (
        "java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "sun.nio.ch", "java.text", "java.time",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks",
    )
)
"""Packages opened to the job server (manifest ``Add-Opens``): those Flink opens for Java 17."""
FLINK_JVM_EXPORTS = ("java.base/sun.net.util", "java.rmi/sun.rmi.registry", "java.security.jgss/sun.security.krb5")
"""Packages exported to the job server (manifest ``Add-Exports``), as Flink exports them for Java 17."""

_SLF4J_VERSION = "1.7.30"  # the slf4j-api version the Flink runner depends on
_FLINK_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>okl</groupId><artifactId>okl-flink-job-server</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.beam</groupId><artifactId>beam-runners-flink-{flink}</artifactId><version>{beam}</version>
      <exclusions><exclusion><groupId>commons-logging</groupId><artifactId>commons-logging</artifactId></exclusion></exclusions>
    </dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>{slf4j}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>jcl-over-slf4j</artifactId><version>{slf4j}</version></dependency>
  </dependencies>
</project>
"""
# The published job server replaces commons-logging with jcl-over-slf4j and logs through
# slf4j-simple; so does this one.
_SIMPLE_LOGGER = "org.slf4j.simpleLogger.defaultLogLevel=warn\norg.slf4j.simpleLogger.logFile=System.err\n"


class EngineUnavailable(RuntimeError):
    """A runner cannot be built: a tool is missing or a registry does not serve what it needs."""


def beam_version() -> str:
    """Version of the installed ``apache-beam`` distribution (without importing Beam)."""
    return importlib.metadata.version("apache-beam")


def runners_dir() -> str:
    """``<cache>/runners``: where the runners are built (``$OKL_CACHE`` or ``~/.cache/okl``)."""
    return os.path.join(default_cache_dir(), "runners")


# -- Prism ---------------------------------------------------------------------------
def _version_key(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of ``2.77.0``, ``v2.77.0`` or ``2.78.0.dev0``."""
    major, minor, patch = ([int(part) for part in re.findall(r"\d+", version)[:3]] + [0, 0, 0])[:3]
    return major, minor, patch


def _served_prism_version(go: str, version: str, env: dict) -> str:
    """``version`` when the Go module proxy serves it, else the nearest released version it serves."""
    proc = subprocess.run([go, "list", "-m", "-versions", PRISM_MODULE], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise EngineUnavailable(f"`go list -m -versions {PRISM_MODULE}` failed: {_last_line(proc.stderr)}")
    released = [v.lstrip("v") for v in proc.stdout.split()[1:] if re.fullmatch(r"v\d+\.\d+\.\d+", v)]
    if version in released:
        return version
    # A proxy may serve versions that it does not list.
    if subprocess.run([go, "mod", "download", f"{PRISM_MODULE}@v{version}"], capture_output=True, env=env).returncode == 0:
        return version
    if not released:
        raise EngineUnavailable(f"the Go module proxy serves neither v{version} nor any other released version of {PRISM_MODULE}")
    wanted = _version_key(version)

    def distance(candidate):  # versions as points on one line (major, minor, patch); the older one on a tie
        key = _version_key(candidate)
        return abs(sum((k - w) * 1000 ** (2 - i) for i, (k, w) in enumerate(zip(key, wanted)))), key > wanted

    nearest = min(released, key=distance)
    _LOG.warning("Prism v%s is not served by the Go module proxy; building v%s, the nearest served version", version, nearest)
    return nearest


def prism_binary(build: bool = False, version: str | None = None) -> str | None:
    """Path of the Prism runner binary in okl's cache, built with ``go install`` when asked.

    Parameters
    ----------
    build : bool
        Build the binary when it is not cached (``go install`` from the Go module proxy,
        a minute or two); needs ``go`` on the PATH.
    version : str, optional
        Beam version of the binary (default: the installed ``apache-beam``).

    Returns
    -------
    str or None
        ``<cache>/runners/prism-v<version>/prism``, or None when it is not cached and
        ``build`` is False.

    Raises
    ------
    EngineUnavailable
        ``go`` is missing or the build fails (the message says why).
    """
    version = version or beam_version()
    folder = os.path.join(runners_dir(), f"prism-v{version}")
    binary = os.path.join(folder, "prism")
    if os.path.isfile(binary) and os.access(binary, os.X_OK):
        return binary
    if not build:
        return None
    go = shutil.which("go")
    if go is None:
        raise EngineUnavailable("`go` is not on the PATH: Prism is built with `go install` (Go 1.21 or newer)")
    # CGO off: a static binary that needs no C compiler to build.
    env = {**os.environ, "CGO_ENABLED": "0"}
    served = _served_prism_version(go, version, env)
    os.makedirs(runners_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=runners_dir(), prefix=".prism-") as tmp:
        env["GOBIN"] = os.path.join(tmp, "bin")
        _LOG.info("building Prism v%s: go install %s@v%s", served, PRISM_PACKAGE, served)
        proc = subprocess.run([go, "install", f"{PRISM_PACKAGE}@v{served}"], capture_output=True, text=True, env=env)
        built = os.path.join(env["GOBIN"], "prism")
        if proc.returncode != 0 or not os.path.isfile(built):
            raise EngineUnavailable(f"`go install {PRISM_PACKAGE}@v{served}` failed: {_last_line(proc.stderr)}")
        with open(os.path.join(tmp, "bin", "SOURCE"), "w") as f:
            f.write(f"go install {PRISM_PACKAGE}@v{served}\n")
        _publish(os.path.join(tmp, "bin"), folder)
    return binary


# -- Flink job server ----------------------------------------------------------------
def _flink_folder() -> str:
    return os.path.join(runners_dir(), f"flink-{FLINK_VERSION}-job-server-{FLINK_BEAM_VERSION}")


def flink_job_server_jar(build: bool = False) -> str | None:
    """Path of a runnable Beam Flink job server jar in okl's cache, built with Maven when asked.

    The jar is a pathing jar over the Flink runner's jars in ``lib/`` beside it (see the
    module docstring); it starts with ``java -jar`` and serves Beam
    :data:`FLINK_BEAM_VERSION` pipelines on an embedded Flink :data:`FLINK_VERSION`
    cluster (``--flink_master=[local]``) or a remote one.

    Parameters
    ----------
    build : bool
        Fetch the jars and write the pathing jar when it is not cached (``mvn`` from
        Maven Central, about 150 MB); needs ``mvn`` and ``java`` on the PATH.

    Returns
    -------
    str or None
        The jar's path, or None when it is not cached and ``build`` is False.

    Raises
    ------
    EngineUnavailable
        ``mvn`` or ``java`` is missing, Maven cannot resolve the runner, or the runner's
        jar lacks :data:`FLINK_MAIN_CLASS`.
    """
    folder = _flink_folder()
    jar = os.path.join(folder, f"beam-runners-flink-{FLINK_VERSION}-job-server-{FLINK_BEAM_VERSION}.jar")
    if os.path.isfile(jar):
        return jar
    if not build:
        return None
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise EngineUnavailable(f"`{tool}` is not on the PATH: the Flink job server needs Java 11+ and Maven")
    os.makedirs(runners_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=runners_dir(), prefix=".flink-") as tmp:
        pom = os.path.join(tmp, "pom.xml")
        with open(pom, "w") as f:
            f.write(_FLINK_POM.format(flink=FLINK_VERSION, beam=FLINK_BEAM_VERSION, slf4j=_SLF4J_VERSION))
        stage = os.path.join(tmp, "server")
        lib = os.path.join(stage, "lib")
        _LOG.info("fetching beam-runners-flink-%s %s and its dependencies with Maven", FLINK_VERSION, FLINK_BEAM_VERSION)
        proc = subprocess.run(
            ["mvn", "-B", "-q", "-f", pom, "dependency:copy-dependencies", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise EngineUnavailable(f"Maven could not fetch beam-runners-flink-{FLINK_VERSION} {FLINK_BEAM_VERSION}: {_maven_error(proc.stdout + proc.stderr)}")
        jars = sorted(name for name in os.listdir(lib) if name.endswith(".jar"))
        runner = f"beam-runners-flink-{FLINK_VERSION}-{FLINK_BEAM_VERSION}.jar"
        if runner not in jars or not _has_class(os.path.join(lib, runner), FLINK_MAIN_CLASS):
            raise EngineUnavailable(f"{runner} fetched by Maven does not hold {FLINK_MAIN_CLASS}")
        shutil.copy(pom, os.path.join(stage, "pom.xml"))  # how lib/ was made
        _write_pathing_jar(os.path.join(stage, os.path.basename(jar)), ["lib/" + name for name in jars])
        _publish(stage, folder)
    return jar


def _has_class(jar: str, class_name: str) -> bool:
    with zipfile.ZipFile(jar) as z:
        return class_name.replace(".", "/") + ".class" in z.namelist()


def _manifest_line(name: str, value: str) -> str:
    """One manifest attribute, wrapped at 72 bytes as the JAR specification requires."""
    line = f"{name}: {value}".encode()
    chunks = [line[:72]] + [line[i:i + 71] for i in range(72, len(line), 71)]
    return "\r\n ".join(chunk.decode() for chunk in chunks) + "\r\n"


def _write_pathing_jar(path: str, class_path: list[str]) -> None:
    manifest = (
        _manifest_line("Manifest-Version", "1.0")
        + _manifest_line("Created-By", "okl pipelines.engines")
        + _manifest_line("Main-Class", FLINK_MAIN_CLASS)
        + _manifest_line("Add-Opens", " ".join(FLINK_JVM_OPENS))
        + _manifest_line("Add-Exports", " ".join(FLINK_JVM_EXPORTS))
        + _manifest_line("Class-Path", " ".join(class_path))
        + "\r\n"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("META-INF/MANIFEST.MF", manifest)
        z.writestr("simplelogger.properties", _SIMPLE_LOGGER)


def flink_runner_options(jar: str | None = None, parallelism: int | None = None) -> list[str]:
    """Beam flags that run a pipeline on a local Flink cluster through the cached job server.

    Parameters
    ----------
    jar : str, optional
        Job server jar (default: :func:`flink_job_server_jar`, which must be built).
    parallelism : int, optional
        Flink's ``--parallelism`` (default: Flink's own, the number of cores).

    Returns
    -------
    list of str
        ``--runner=FlinkRunner --flink_job_server_jar=... --flink_master=[local]
        --environment_type=LOOPBACK`` (and ``--parallelism``).
    """
    jar = jar or flink_job_server_jar()
    if jar is None:
        raise EngineUnavailable("the Flink job server is not built: run `python -m pipelines.engines install flink` (or `make runners`)")
    flags = ["--runner=FlinkRunner", f"--flink_job_server_jar={jar}", "--flink_master=[local]", "--environment_type=LOOPBACK"]
    if parallelism:
        flags.append(f"--parallelism={parallelism}")
    return flags


# -- shared helpers ------------------------------------------------------------------
def _publish(staged: str, folder: str) -> None:
    """Move a completed build into place (atomically; a concurrent build that won is kept)."""
    try:
        os.rename(staged, folder)
    except OSError:
        if not os.path.isdir(folder):
            raise


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _maven_error(text: str) -> str:
    errors = [line.strip() for line in text.splitlines() if "[ERROR]" in line and line.strip() != "[ERROR]"]
    return errors[0].replace("[ERROR] ", "") if errors else _last_line(text)


RUNNERS = {"prism": prism_binary, "flink": flink_job_server_jar}
"""Runner name -> function returning its cached path (``build=True``: build it when missing)."""
