"""Google-signed OIDC ID tokens, minted by PyJWT against a local JWKS server: one good token, every attack refused."""
import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from conftest import SECRET, recorded, signed_headers, start_relay, stop_relay

AUDIENCE = "https://relay.example.com/webhooks/remote-config"
INVOKER = "eventarc-invoker@demo-project.iam.gserviceaccount.com"
CE = {
    "content-type": "application/json", "ce-specversion": "1.0", "ce-id": "ev-1",
    "ce-type": "google.firebase.remoteconfig.remoteConfig.v1.updated",
    "ce-source": "//firebaseremoteconfig.googleapis.com/projects/demo-project",
}
BODY = json.dumps({"versionNumber": "42", "updateType": "INCREMENTAL_UPDATE"}).encode()


class Keys:
    """RSA keys and the JWKS document that publishes some of them."""

    def __init__(self):
        self.private = {}
        self.published = []
        self.fetches = 0

    def add(self, kid, publish=True):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.private[kid] = key
        if publish:
            self.published.append(kid)
        return key

    def jwks(self):
        keys = []
        for kid in self.published:
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private[kid].public_key()))
            keys.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
        return {"keys": keys}

    def public_pem(self, kid):
        return self.private[kid].public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.fixture
def keys():
    keys = Keys()
    keys.add("google-key-1")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            keys.fetches += 1
            body = json.dumps(keys.jwks()).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    keys.url = f"http://127.0.0.1:{server.server_address[1]}/oauth2/v3/certs"
    yield keys
    server.shutdown()


def oidc_relay(emulator, tmp_path, keys, auth="oidc", min_refresh=1):
    return start_relay(emulator, tmp_path, f"""
webhook: {{auth: {auth}, secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
oidc:
  audiences: ["{AUDIENCE}"]
  allowedEmails: ["{INVOKER}"]
  jwksURL: "{keys.url}"
  jwksMinRefreshSeconds: {min_refresh}
""")


@pytest.fixture
def relay(emulator, tmp_path, keys):
    relay = oidc_relay(emulator, tmp_path, keys)
    yield relay
    stop_relay(relay)


def claims(**overrides):
    now = int(time.time())
    base = {"iss": "https://accounts.google.com", "aud": AUDIENCE, "email": INVOKER, "email_verified": True,
            "iat": now, "exp": now + 3600, "sub": "1234567890"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def token(keys, kid="google-key-1", **overrides):
    return jwt.encode(claims(**overrides), keys.private[kid], algorithm="RS256", headers={"kid": kid})


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def post(relay, bearer, headers=None):
    all_headers = {**CE, **({"authorization": f"Bearer {bearer}"} if bearer else {}), **(headers or {})}
    return requests.post(relay["webhook"], data=BODY, headers=all_headers, timeout=30)


def expect_refusal(relay, answer, check):
    assert answer.status_code == 401, answer.text
    problem = answer.json()
    assert problem["type"] == "urn:rc-relay:problem:invalid-id-token"
    assert check in problem["detail"], problem["detail"]
    assert "eyJ" not in answer.text
    assert recorded(relay["emulator"]) == []


def test_a_google_signed_token_is_accepted(relay, keys):
    answer = post(relay, token(keys))
    assert answer.status_code == 200, answer.text
    assert [m["message"]["data"]["CONFIG_VERSION"] for m in recorded(relay["emulator"])] == ["42"]


def test_the_short_issuer_form_is_accepted(relay, keys):
    assert post(relay, token(keys, iss="accounts.google.com")).status_code == 200


def test_no_token_is_refused(relay):
    expect_refusal(relay, post(relay, None), "no Authorization")


# Times (iat, exp, nbf) are seconds from when the test runs, not from when the module was collected: a long run
# could otherwise reach a "future" one.
TIMES = ("iat", "exp", "nbf")


@pytest.mark.parametrize("name,overrides,check", [
    ("wrong audience", {"aud": "https://elsewhere.example.com/"}, "audience"),
    ("wrong issuer", {"iss": "https://evil.example.com"}, "issuer"),
    ("expired", {"iat": -7200, "exp": -3600}, "expired"),
    ("not yet valid", {"iat": 3600, "exp": 7200}, "not valid yet"),
    ("nbf in the future", {"nbf": 3600}, "not valid yet"),
    ("email not verified", {"email_verified": False}, "not verified"),
    ("unlisted email", {"email": "someone-else@demo-project.iam.gserviceaccount.com"}, "allowedEmails"),
    ("no email", {"email": None}, "allowedEmails"),
])
def test_bad_claims_are_refused(relay, keys, name, overrides, check):
    now = int(time.time())
    overrides = {claim: now + value if claim in TIMES else value for claim, value in overrides.items()}
    expect_refusal(relay, post(relay, token(keys, **overrides)), check)


def test_unknown_kid_is_refused(relay, keys):
    keys.add("stranger", publish=False)
    expect_refusal(relay, post(relay, token(keys, kid="stranger")), "kid")


def test_alg_none_is_refused(relay, keys):
    unsigned = b64(json.dumps({"alg": "none", "kid": "google-key-1"}).encode()) + "." + b64(json.dumps(claims()).encode()) + "."
    expect_refusal(relay, post(relay, unsigned), "'none' is not RS256")


def test_hs256_with_the_public_key_as_secret_is_refused(relay, keys):
    header = b64(json.dumps({"alg": "HS256", "kid": "google-key-1", "typ": "JWT"}).encode())
    payload = b64(json.dumps(claims()).encode())
    signature = hmac.new(keys.public_pem("google-key-1"), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    expect_refusal(relay, post(relay, f"{header}.{payload}.{b64(signature)}"), "'HS256' is not RS256")


def test_tampered_payload_is_refused(relay, keys):
    header, _, signature = token(keys).split(".")
    forged = b64(json.dumps(claims(email="attacker@evil.example.com")).encode())
    expect_refusal(relay, post(relay, f"{header}.{forged}.{signature}"), "signature")


def test_a_token_signed_by_another_key_with_a_known_kid_is_refused(relay, keys):
    keys.add("attacker", publish=False)
    forged = jwt.encode(claims(), keys.private["attacker"], algorithm="RS256", headers={"kid": "google-key-1"})
    expect_refusal(relay, post(relay, forged), "signature")


def test_a_rotated_key_is_fetched_once_when_the_refresh_interval_allows(relay, keys):
    assert post(relay, token(keys)).status_code == 200
    assert keys.fetches == 1
    for _ in range(5):
        assert post(relay, token(keys, kid="google-key-1") + "x").status_code == 401  # bad signatures: no refetch
    assert keys.fetches == 1
    keys.add("google-key-2")
    # Unknown until the refresh interval (1 s) since the last fetch has passed; then fetched once, and accepted.
    deadline = time.time() + 60
    answer = post(relay, token(keys, kid="google-key-2"))
    while answer.status_code != 200 and time.time() < deadline:
        assert answer.status_code == 401, answer.text
        time.sleep(0.05)
        answer = post(relay, token(keys, kid="google-key-2"))
    assert answer.status_code == 200, answer.text
    assert keys.fetches == 2


def test_forged_kids_cause_no_storm_of_key_fetches(emulator, tmp_path, keys):
    relay = oidc_relay(emulator, tmp_path, keys, min_refresh=3600)
    try:
        assert post(relay, token(keys)).status_code == 200
        keys.add("forged", publish=False)
        for _ in range(20):
            assert post(relay, token(keys, kid="forged")).status_code == 401
        assert keys.fetches == 1
    finally:
        stop_relay(relay)


def test_both_requires_the_signature_and_the_token(emulator, tmp_path, keys):
    relay = oidc_relay(emulator, tmp_path, keys, auth="both")
    try:
        only_token = post(relay, token(keys))
        assert only_token.status_code == 401
        assert only_token.json()["type"] == "urn:rc-relay:problem:invalid-signature"
        only_signature = requests.post(relay["webhook"], data=BODY, headers={**CE, **signed_headers(BODY)}, timeout=30)
        assert only_signature.json()["type"] == "urn:rc-relay:problem:invalid-id-token"
        both = post(relay, token(keys), headers=signed_headers(BODY))
        assert both.status_code == 200, both.text
    finally:
        stop_relay(relay)


def test_any_takes_either_proof_and_refuses_neither(emulator, tmp_path, keys):
    """Eventarc (ID token) and a CI job (signature) at once: each proves itself its own way."""
    relay = oidc_relay(emulator, tmp_path, keys, auth="any")
    try:
        def event(version, headers=None, bearer=None):
            body = json.dumps({"versionNumber": str(version)}).encode()
            all_headers = {**CE, "ce-id": f"ev-any-{version}", **({"authorization": f"Bearer {bearer}"} if bearer else {}),
                           **(headers(body) if headers else {})}
            return requests.post(relay["webhook"], data=body, headers=all_headers, timeout=30)

        assert event(1, bearer=token(keys)).status_code == 200
        assert event(2, headers=signed_headers).status_code == 200
        # A token that fails does not sink a request that is signed, and a signature that fails is refused.
        assert event(3, headers=signed_headers, bearer=token(keys, aud="https://elsewhere.example.com")).status_code == 200
        neither = event(4)
        assert neither.status_code == 401 and neither.json()["type"] == "urn:rc-relay:problem:invalid-signature"
        forged_token = event(5, bearer=token(keys, email="someone@else.iam.gserviceaccount.com"))
        assert forged_token.status_code == 401 and forged_token.json()["type"] == "urn:rc-relay:problem:invalid-id-token"
        bad_signature = event(6, headers=lambda body: signed_headers(body, secret="whsec_" + base64.b64encode(b"x" * 32).decode()))
        assert bad_signature.status_code == 401 and bad_signature.json()["type"] == "urn:rc-relay:problem:invalid-signature"
        assert len(recorded(emulator)) == 3, recorded(emulator)
    finally:
        stop_relay(relay)


def test_unreachable_keys_answer_503_so_the_sender_retries(emulator, tmp_path, keys):
    keys.url = "http://127.0.0.1:9/certs"
    relay = oidc_relay(emulator, tmp_path, keys)
    try:
        # The second comes within the refresh interval after the failed fetch: still unverifiable, not forged.
        for _ in range(2):
            answer = post(relay, token(keys))
            assert answer.status_code == 503, answer.text
            assert answer.json()["type"] == "urn:rc-relay:problem:verification-unavailable"
            assert answer.headers["retry-after"] == "30"
            # The HTTP client's error (host, port, errno) is for the log, not for the caller.
            assert "127.0.0.1" not in answer.text and "onnect" not in answer.text and "9/certs" not in answer.text
        assert recorded(emulator) == []
    finally:
        stop_relay(relay)


SAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "Tests" / "Fixtures" / "samples"


def push(relay, envelope, bearer):
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {bearer}"} if bearer else {})}
    return requests.post(relay["url"] + "/pubsub/remote-config", data=json.dumps(envelope), headers=headers, timeout=30)


def test_pubsub_push_is_relayed_and_redelivery_is_acked_without_a_second_ping(relay, keys):
    envelope = json.loads((SAMPLES / "pubsub-push.json").read_text())
    first = push(relay, envelope, token(keys))
    assert first.status_code == 200, first.text  # 200: Pub/Sub acks
    assert first.json()["event"]["format"] == "pubsub"
    assert first.json()["event"]["id"] == "2070443601311540"
    again = push(relay, envelope, token(keys))
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    messages = recorded(relay["emulator"])
    assert [m["message"]["data"] for m in messages] == [{"CONFIG_STATE": "STALE", "CONFIG_VERSION": "42"}]


def test_pubsub_push_without_a_token_is_refused_and_nacked(relay):
    envelope = json.loads((SAMPLES / "pubsub-push.json").read_text())
    answer = push(relay, envelope, None)
    assert answer.status_code == 401
    assert answer.json()["type"] == "urn:rc-relay:problem:invalid-id-token"
    assert recorded(relay["emulator"]) == []


def test_pubsub_push_with_bad_data_is_nacked_for_the_dead_letter_topic(relay, keys):
    envelope = {"message": {"data": "bm90IGpzb24=", "messageId": "99"}, "subscription": "projects/p/subscriptions/s"}
    answer = push(relay, envelope, token(keys))
    assert answer.status_code == 400
    assert answer.json()["type"] == "urn:rc-relay:problem:malformed-event"


def test_pubsub_path_is_absent_without_oidc_and_credentials_come_first(emulator, tmp_path):
    relay = start_relay(emulator, tmp_path, "webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}")
    try:
        # No token at all: 401, as for every path that needs credentials; with one: there is nothing here.
        missing = push(relay, {"message": {}}, None)
        assert missing.status_code == 401 and missing.json()["type"] == "urn:rc-relay:problem:invalid-id-token"
        assert push(relay, {"message": {}}, "a.b.c").status_code == 404
        assert recorded(emulator) == []
    finally:
        stop_relay(relay)


def test_a_jwks_file_serves_air_gapped_runs(emulator, tmp_path, keys):
    jwks = tmp_path / "google-certs.json"
    jwks.write_text(json.dumps(keys.jwks()))
    relay = start_relay(emulator, tmp_path, f"""
webhook: {{auth: oidc}}
oidc: {{audiences: ["{AUDIENCE}"], allowedEmails: ["{INVOKER}"], jwksFile: "{jwks}"}}
""")
    try:
        assert post(relay, token(keys)).status_code == 200
        keys.add("rotated-later")
        refused = post(relay, token(keys, kid="rotated-later"))
        assert refused.status_code == 401 and "kid" in refused.json()["detail"]
        assert len(recorded(relay["emulator"])) == 1
        assert keys.fetches == 0  # the file is all it reads
    finally:
        stop_relay(relay)
