"""A CA, and a certificate it signed for localhost and 127.0.0.1, as PEM files made by openssl: for the emulator's
HTTPS in the transport tests and in `scripts/bench --tls`."""
import subprocess


def make_certificates(directory, ca_name="rc-relay test CA"):
    """Writes ca.pem, server.pem and server.key into `directory` (made if missing); returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", f"/CN={ca_name}", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=localhost",
            "-keyout", "server.key", "-out", "server.csr")
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "san.ext", "-out", "server.pem")
    return {"ca": directory / "ca.pem", "cert": directory / "server.pem", "key": directory / "server.key"}
