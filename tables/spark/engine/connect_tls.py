"""TLS in front of a Spark Connect server that clients reach over a network.

Spark's Connect server speaks plain gRPC, and gRPC sends a client's bearer token only to a
loopback server or over TLS (tables.spark.engine.connect). In a deployment the server's clients are
other containers, so the server listens on loopback inside its own container and this relay,
beside it, is the only thing on the network: it ends TLS (ALPN `h2`, as gRPC requires) and
passes the bytes to the server, which then checks the token (SPARK_CONNECT_AUTHENTICATE_TOKEN)
on every call. Clients name it `sc://host:port/;use_ssl=true` and trust its CA through gRPC's
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH.

    python -m tables.spark.engine.connect_tls certs DIR HOST   # ca.pem, server.pem, server.key, once
    python -m tables.spark.engine.connect_tls serve LISTEN_PORT SERVER_PORT DIR -- COMMAND...
      # the relay on 0.0.0.0:LISTEN_PORT to 127.0.0.1:SERVER_PORT, with COMMAND (the server) as
      # its child: either ending ends both, so the container's restart policy sees it
"""

from __future__ import annotations

import asyncio
import datetime
import signal
import ssl
import sys
from pathlib import Path

CA, CERT, KEY = "ca.pem", "server.pem", "server.key"
_CHUNK = 64 * 1024


def certificates(directory: Path, host: str, days: int = 3650) -> bool:
    """A private CA and a server certificate for `host` it signed, written into `directory`
    (the key readable by its owner only) unless there already; whether they were made."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    if all((directory / name).exists() for name in (CA, CERT, KEY)):
        return False
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def cert(subject: str, key, issuer: str, signer, ca: bool, names: list[str]):
        built = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if names:
            built = built.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        return built.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = cert("deltaweb Spark Connect CA", ca_key, "deltaweb Spark Connect CA", ca_key, True, [])
    server = cert(host, key, "deltaweb Spark Connect CA", ca_key, False, [host])
    pem = serialization.Encoding.PEM
    key_path = directory / KEY
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    (directory / CERT).write_bytes(server.public_bytes(pem))
    (directory / CA).write_bytes(ca_cert.public_bytes(pem))
    return True


def server_context(directory: Path) -> ssl.SSLContext:
    """TLS 1.2 or later with the server's certificate, offering HTTP/2 (gRPC's ALPN)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(directory / CERT, directory / KEY)
    context.set_alpn_protocols(["h2"])
    return context


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        writer.close()


async def relay(listen_port: int, server_port: int, context: ssl.SSLContext) -> asyncio.Server:
    """The TLS listener on every address, each connection passed to the loopback server."""

    async def one(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", server_port)
        except OSError:
            client_writer.close()  # the server is not up (yet): the client retries
            return
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))

    return await asyncio.start_server(one, "0.0.0.0", listen_port, ssl=context)


async def _serve(listen_port: int, server_port: int, directory: Path, command: list[str]) -> int:
    listener = await relay(listen_port, server_port, server_context(directory))
    child = await asyncio.create_subprocess_exec(*command)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, child.terminate)
    code = await child.wait()
    listener.close()
    return code


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "certs":
        made = certificates(Path(argv[1]), argv[2])
        print(f"{'made' if made else 'kept'} {argv[1]}/{CA}, {CERT}, {KEY}")
        return 0
    if len(argv) >= 6 and argv[0] == "serve" and argv[4] == "--":
        return asyncio.run(_serve(int(argv[1]), int(argv[2]), Path(argv[3]), argv[5:]))
    print(__doc__.split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
