"""``mav-keystore``: an SROS2 keystore for the simulation graph, written with openssl.

One certificate authority (prime256v1, as DDS-Security asks) is both the identity and the
permissions CA. Each node of the graph and the operator get an enclave ``/<name>`` with
its own key and certificate (``CN=/<name>``) and a permissions document allowing exactly
its endpoints (``endpoints``, ``policy``), signed by the CA as S/MIME. The layout is the one
``ros2 security`` writes, so rcl finds everything from ``ROS_SECURITY_KEYSTORE`` and the
node's enclave:

    public/ca.cert.pem            identity_ca.cert.pem, permissions_ca.cert.pem -> ca.cert.pem
    private/ca.key.pem            identity_ca.key.pem, permissions_ca.key.pem -> ca.key.pem
    enclaves/governance.xml, governance.p7s
    enclaves/<name>/cert.pem, key.pem, permissions.xml, permissions.p7s, and links to
                    identity_ca.cert.pem, permissions_ca.cert.pem, governance.p7s

Running it again keeps the CA and the enclaves' keys and rewrites the governance and every
permissions document (new endpoints, new validity).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mav_bringup.security import policy
from mav_bringup.security.endpoints import Endpoints, graph_endpoints
from mav_ros_common.parameters import show

CA_NAME = "trident sros2 CA"
MAX_DOMAIN_ID = 232  # Fast DDS maps larger ids beyond the UDP port range
ENCLAVE_NAME = re.compile(r"(/[A-Za-z_][A-Za-z0-9_]*)+")
OPENSSL_ERROR_CHARACTERS = 400
# Extensions of the two kinds of certificate. The CA signs certificates and the S/MIME
# documents (digitalSignature: openssl and the DDS security plugins check the signer's use).
OPENSSL_CONFIG = """\
[req]
distinguished_name = subject
[subject]
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[identity]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
authorityKeyIdentifier = keyid
"""
NEW_EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def enclave_of(node_name: str) -> str:
    """The enclave of a node of the graph (and of the operator): ``/<name>``."""
    return f"/{node_name}"


class KeystoreError(RuntimeError):
    """openssl is missing or failed; the message says which step."""


class _OpenSsl:
    """openssl commands run with the extension file of this module."""

    def __init__(self, executable: str, config: Path) -> None:
        self.executable = executable
        self.config = config

    def __call__(self, *arguments: str, data: bytes | None = None) -> bytes:
        try:
            result = subprocess.run([self.executable, *arguments], input=data,
                                    capture_output=True, check=True)
        except subprocess.CalledProcessError as error:
            detail = error.stderr.decode(errors="replace").strip()[-OPENSSL_ERROR_CHARACTERS:]
            raise KeystoreError(f"openssl {arguments[0]} failed: {detail}") from None
        return result.stdout

    def new_ca(self, key: Path, cert: Path, days: int) -> None:
        self("req", "-x509", "-new", *NEW_EC_KEY, "-keyout", str(key), "-out", str(cert),
             "-days", str(days), "-sha256", "-subj", f"/CN={CA_NAME}",
             "-config", str(self.config), "-extensions", "ca")

    def new_identity(self, enclave: str, key: Path, cert: Path, ca_key: Path, ca_cert: Path,
                     days: int) -> None:
        # '/' separates fields in -subj: the enclave's slashes are escaped.
        subject = "/CN=" + enclave.replace("/", "\\/")
        request = self("req", "-new", *NEW_EC_KEY, "-keyout", str(key), "-subj", subject,
                       "-config", str(self.config))
        self("x509", "-req", "-CA", str(ca_cert), "-CAkey", str(ca_key),
             "-set_serial", f"0x{secrets.token_hex(16)}", "-days", str(days), "-sha256",
             "-extfile", str(self.config), "-extensions", "identity", "-out", str(cert),
             data=request)

    def sign(self, document: Path, signed: Path, ca_key: Path, ca_cert: Path) -> None:
        """S/MIME, clear text with a detached signature, as DDS-Security reads it."""
        self("smime", "-sign", "-text", "-md", "sha256", "-in", str(document),
             "-out", str(signed), "-signer", str(ca_cert), "-inkey", str(ca_key))


def _link(target: Path, link: Path) -> None:
    """A relative symbolic link ``link`` -> ``target`` (replacing an older one)."""
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _private(path: Path) -> None:
    path.chmod(0o600)


def write_keystore(keystore: Path, grants: Mapping[str, Endpoints], domain_id: int,
                   days: int, openssl: str = "openssl") -> list[str]:
    """Create or update the keystore for enclaves ``enclave_of(name)`` with the endpoints of
    ``grants`` (name -> endpoints) on ``domain_id``, valid ``days`` from now; the enclaves."""
    if shutil.which(openssl) is None:
        raise KeystoreError(f"{show(openssl)} not found: install openssl "
                            "(Debian/Ubuntu: apt-get install openssl)")
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f"domain id {domain_id} is outside 0..{MAX_DOMAIN_ID}")
    enclaves = {name: enclave_of(name) for name in grants}
    for enclave in enclaves.values():
        if not ENCLAVE_NAME.fullmatch(enclave):
            raise ValueError(f"enclave {show(enclave)} is not a valid ROS enclave name")
    public, private, root = (keystore / part for part in ("public", "private", "enclaves"))
    for folder in (public, private, root):
        folder.mkdir(parents=True, exist_ok=True)
    private.chmod(0o700)
    ca_cert, ca_key = public / "ca.cert.pem", private / "ca.key.pem"
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "openssl.cnf"
        config.write_text(OPENSSL_CONFIG)
        run = _OpenSsl(openssl, config)
        new_ca = not (ca_cert.is_file() and ca_key.is_file())
        if new_ca:
            run.new_ca(ca_key, ca_cert, days)
            _private(ca_key)
        for role in ("identity_ca", "permissions_ca"):
            _link(ca_cert, public / f"{role}.cert.pem")
            _link(ca_key, private / f"{role}.key.pem")
        governance = root / "governance.xml"
        governance.write_bytes(policy.governance_xml(domain_id))
        run.sign(governance, root / "governance.p7s", ca_key, ca_cert)
        now = datetime.now(UTC).replace(microsecond=0)
        for name, enclave in enclaves.items():
            folder = root / enclave.lstrip("/")
            folder.mkdir(parents=True, exist_ok=True)
            key, cert = folder / "key.pem", folder / "cert.pem"
            if new_ca or not (key.is_file() and cert.is_file()):
                run.new_identity(enclave, key, cert, ca_key, ca_cert, days)
                _private(key)
            for role in ("identity_ca", "permissions_ca"):
                _link(public / f"{role}.cert.pem", folder / f"{role}.cert.pem")
            _link(root / "governance.p7s", folder / "governance.p7s")
            permissions = folder / "permissions.xml"
            permissions.write_bytes(policy.permissions_xml(
                enclave, policy.dds_topics(grants[name]), domain_id, now,
                now + timedelta(days=days)))
            run.sign(permissions, folder / "permissions.p7s", ca_key, ca_cert)
    return sorted(enclaves.values())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="mav-keystore",
        description="Write an SROS2 keystore for the simulation graph (sim.launch.py): a CA, "
                    "and an enclave for the simulator, the controller, the trident EKF and the "
                    "operator, each allowed exactly the topics and services it uses (read from "
                    "the nodes). Running it again keeps the CA and keys and renews the "
                    "permissions. docs/security.md says how to run the nodes with it.")
    parser.add_argument("keystore", type=Path, help="folder to write (ROS_SECURITY_KEYSTORE)")
    parser.add_argument("--domain-id", type=int,
                        default=os.environ.get("ROS_DOMAIN_ID", "").strip() or "0",
                        help="ROS domain the permissions are for (default: ROS_DOMAIN_ID, "
                             "else 0)")
    parser.add_argument("--days", type=int, default=365,
                        help="validity of new certificates and of the permissions, days "
                             "(default %(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.days < 1:
        print("mav-keystore: --days must be at least 1", file=sys.stderr)
        return 2
    try:
        enclaves = write_keystore(args.keystore, graph_endpoints(), args.domain_id, args.days)
    except (KeystoreError, ValueError, OSError) as error:
        print(f"mav-keystore: {error}", file=sys.stderr)
        return 2
    print(f"mav-keystore: {args.keystore}: enclaves {' '.join(enclaves)} on domain "
          f"{args.domain_id}, valid {args.days} days")
    print(f"export ROS_SECURITY_KEYSTORE={args.keystore.resolve()} ROS_SECURITY_ENABLE=true "
          f"ROS_SECURITY_STRATEGY=Enforce ROS_DOMAIN_ID={args.domain_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
