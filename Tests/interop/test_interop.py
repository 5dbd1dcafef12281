"""rc-relay against the reference libraries: standardwebhooks, the CloudEvents SDK, and google-auth."""
import base64
import json
import os
import re
import socket
import subprocess

import requests
from cloudevents.core.bindings.http import to_binary_event, to_structured_event
from cloudevents.core.v1.event import CloudEvent
from cryptography.hazmat.primitives import serialization
from google.auth import jwt as google_jwt
from google.auth.transport.requests import AuthorizedSession
from google.auth.transport.requests import Request as GoogleRequest
from google.oauth2 import service_account

from conftest import BINARY, ROOT, Process, recorded, signed_headers, start_relay, stop_relay, until

SAMPLES = ROOT / "Tests" / "Fixtures" / "samples"
UPDATED = "google.firebase.remoteconfig.remoteConfig.v1.updated"
SOURCE = "//firebaseremoteconfig.googleapis.com/projects/demo-project"
VERSION = json.loads((SAMPLES / "template-version.json").read_text())


def test_standardwebhooks_signature_is_accepted(relay):
    body = json.dumps({"versionNumber": 77, "updateType": "FORCED_UPDATE"}).encode()
    answer = requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30)
    assert answer.status_code == 200, answer.text
    messages = recorded(relay["emulator"])
    assert [m["message"]["data"] for m in messages] == [{"CONFIG_STATE": "STALE", "CONFIG_VERSION": "77"}]
    assert answer.json()["deliveries"][0]["messageName"] == messages[0]["name"]


def test_standardwebhooks_tampered_body_is_refused(relay):
    body = json.dumps({"versionNumber": 78}).encode()
    headers = signed_headers(body)
    answer = requests.post(relay["webhook"], data=body.replace(b"78", b"79"), headers={"content-type": "application/json", **headers}, timeout=30)
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["type"] == "urn:rc-relay:problem:invalid-signature"
    assert recorded(relay["emulator"]) == []


def test_a_webhook_ids_form_is_checked_only_once_the_signature_holds(relay):
    """An unsigned or forged caller gets the same 401 whatever its `webhook-id`: it learns nothing of the id's rules."""
    body = json.dumps({"versionNumber": 80}).encode()
    for bad in ("x" * 257, "tab\there"):
        unsigned = requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", "webhook-id": bad}, timeout=30)
        assert unsigned.status_code == 401, unsigned.text
        assert unsigned.json()["type"] == "urn:rc-relay:problem:invalid-signature"
        forged = requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body), "webhook-id": bad}, timeout=30)
        assert forged.status_code == 401, forged.text
        signed = requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body, msg_id=bad)}, timeout=30)
        assert signed.status_code == 400, signed.text
        assert signed.json()["type"] == "urn:rc-relay:problem:malformed-event"
        assert signed.json()["detail"].startswith("webhook-id "), signed.text
    assert recorded(relay["emulator"]) == []


def test_signatures_in_several_header_lines_are_one_list(relay):
    """`webhook-signature` sent as two lines (as a proxy or client may split it): a valid entry in either is enough."""
    import http.client
    from urllib.parse import urlparse

    url = urlparse(relay["webhook"])
    wrong = "v1," + base64.b64encode(bytes(32)).decode()
    for version, valid_first in ((82, True), (83, False)):
        body = json.dumps({"versionNumber": version}).encode()
        headers = signed_headers(body)
        lines = [headers["webhook-signature"], wrong] if valid_first else [wrong, headers["webhook-signature"]]
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        try:
            connection.putrequest("POST", url.path)
            for name, value in [("content-type", "application/json"), ("content-length", str(len(body))),
                                ("webhook-id", headers["webhook-id"]), ("webhook-timestamp", headers["webhook-timestamp"])]:
                connection.putheader(name, value)
            for line in lines:
                connection.putheader("webhook-signature", line)
            connection.endheaders(body)
            answer = connection.getresponse()
            assert answer.status == 200, (valid_first, answer.read())
        finally:
            connection.close()
    assert [m["message"]["data"]["CONFIG_VERSION"] for m in recorded(relay["emulator"])] == ["82", "83"]


def test_cloudevents_binary_mode(relay):
    event = CloudEvent({"type": UPDATED, "source": SOURCE, "id": "ce-binary-1", "datacontenttype": "application/json"}, VERSION)
    message = to_binary_event(event)
    headers, body = message.headers, message.body
    answer = requests.post(relay["webhook"], data=body, headers={**headers, **signed_headers(body)}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["event"] == {
        "format": "cloudevent-binary", "id": "ce-binary-1", "project": "demo-project", "versionNumber": "42",
        "updateType": "INCREMENTAL_UPDATE",
    }
    messages = recorded(relay["emulator"])
    assert len(messages) == 1
    expected = json.loads((SAMPLES / "fcm-silent-ping-example.json").read_text())["message"]
    assert messages[0]["message"] == expected


def test_cloudevents_structured_mode(relay):
    event = CloudEvent({"type": UPDATED, "source": SOURCE, "id": "ce-structured-1", "datacontenttype": "application/json"}, VERSION)
    message = to_structured_event(event)
    headers, body = message.headers, message.body
    answer = requests.post(relay["webhook"], data=body, headers={**headers, **signed_headers(body)}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["event"]["format"] == "cloudevent-structured"
    assert recorded(relay["emulator"])[0]["message"]["data"]["CONFIG_VERSION"] == "42"


def test_cloudevents_of_another_type_are_refused(relay):
    event = CloudEvent({"type": "google.cloud.storage.object.v1.finalized", "source": SOURCE, "id": "x", "datacontenttype": "application/json"}, {"bucket": "b"})
    message = to_binary_event(event)
    headers, body = message.headers, message.body
    answer = requests.post(relay["webhook"], data=body, headers={**headers, **signed_headers(body)}, timeout=30)
    assert answer.status_code == 422
    assert answer.json()["type"] == "urn:rc-relay:problem:unknown-event-type"
    assert recorded(relay["emulator"]) == []


def test_google_auth_verifies_the_assertion_rc_relay_signs(relay):
    body = json.dumps({"versionNumber": 5}).encode()
    assert requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30).status_code == 200
    key = relay["emulator"]["key"]
    assertions = requests.get(relay["emulator"]["url"] + "/emulator/assertions", timeout=10).json()
    assert len(assertions) == 1
    private = serialization.load_pem_private_key(key["private_key"].encode(), password=None)
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    claims = google_jwt.decode(assertions[0], certs={key["private_key_id"]: public_pem.decode()}, audience=key["token_uri"])
    assert claims["iss"] == key["client_email"]
    assert claims["scope"].split(" ") == ["https://www.googleapis.com/auth/firebase.messaging",
                                          "https://www.googleapis.com/auth/firebase.remoteconfig"]
    assert claims["exp"] - claims["iat"] <= 3600
    assert google_jwt.decode_header(assertions[0])["kid"] == key["private_key_id"]


def test_google_auth_client_gets_a_token_from_the_emulator(emulator):
    """The emulator's token endpoint accepts Google's own client, so it judges by Google's rules, not rc-relay's."""
    credentials = service_account.Credentials.from_service_account_file(
        str(emulator["key_file"]), scopes=["https://www.googleapis.com/auth/firebase.messaging"]
    )
    credentials.refresh(GoogleRequest())
    assert credentials.token.startswith("ya29.")
    answer = requests.post(
        emulator["url"] + "/v1/projects/demo-project/messages:send",
        json={"message": {"topic": "PUSH_RC", "data": {"CONFIG_STATE": "STALE"}}},
        headers={"Authorization": f"Bearer {credentials.token}"}, timeout=10,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["name"].startswith("projects/demo-project/messages/")


def test_development_profile_prints_a_working_signed_curl(tmp_path):
    """The README's first command: no configuration, an emulator inside, a snippet to paste."""
    proc = Process([BINARY, "serve"], env={"RC_RELAY_PORT": "0"})
    try:
        proc.wait_for(lambda l: "/admin/deliveries" in l)
        output = proc.output
        snippet = output[output.index("SECRET="):output.index("; echo") + len("; echo")]
        result = subprocess.run(["bash", "-c", snippet], capture_output=True, text=True, timeout=30)
        answer = json.loads(result.stdout)
        assert answer["status"] == "delivered", result.stdout + result.stderr
        messages_url = re.search(r"curl -s (http://\S+/emulator/messages)", output).group(1)
        messages = requests.get(messages_url, timeout=10).json()
        assert [m["message"]["topic"] for m in messages] == ["PUSH_RC"]
        assert messages[0]["message"]["data"] == {"CONFIG_STATE": "STALE", "CONFIG_VERSION": "42"}
        # The printed admin call works too, and shows that delivery.
        admin = re.search(r"(curl -s -H 'Authorization: Bearer \S+' http://\S+/admin/deliveries)", output).group(1)
        listed = json.loads(subprocess.run(["bash", "-c", admin], capture_output=True, text=True, timeout=30).stdout)
        assert [(d["route"], d["versionNumber"], d["status"]) for d in listed["deliveries"]] == [("default", "42", "accepted")]
        # A publish in the emulator's Remote Config, announced by no webhook: catch-up polling pings it.
        publish = re.search(r"(curl -s -X POST http://\S+/emulator/remote-config/demo-project/publish -d '[^']+')", output).group(1)
        published = json.loads(subprocess.run(["bash", "-c", publish], capture_output=True, text=True, timeout=30).stdout)
        assert published["versionNumber"] == "43"
        proc.wait_for(lambda l: "poll: relaying a version no webhook announced" in l, timeout=120)
        proc.wait_for(lambda l: "ping accepted by FCM" in l and "43" in l)
        assert requests.get(messages_url, timeout=10).json()[1]["message"]["data"]["CONFIG_VERSION"] == "43"
    finally:
        proc.stop()


def test_google_auth_session_reads_the_emulators_remote_config(emulator):
    """Google's own client, with the Remote Config scope, reads the emulator's versions and templates as it would
    Google's; a token with only FCM's scope is refused as Google refuses it."""
    credentials = service_account.Credentials.from_service_account_file(
        str(emulator["key_file"]), scopes=["https://www.googleapis.com/auth/firebase.remoteconfig"])
    session = AuthorizedSession(credentials)
    base = emulator["url"]
    for greeting in ("Hello", "Hola", "Bonjour"):
        template = {"parameters": {"welcome": {"defaultValue": {"value": greeting}, "valueType": "STRING"}}}
        assert requests.post(f"{base}/emulator/remote-config/demo-project/publish", json=template, timeout=10).ok
    assert requests.post(f"{base}/emulator/remote-config/demo-project/rollback?versionNumber=1", timeout=10).ok
    first = session.get(f"{base}/v1/projects/demo-project/remoteConfig:listVersions?pageSize=3", timeout=10).json()
    assert [v["versionNumber"] for v in first["versions"]] == ["4", "3", "2"]
    assert first["versions"][0]["updateType"] == "ROLLBACK" and first["versions"][0]["rollbackSource"] == "1"
    rest = session.get(f"{base}/v1/projects/demo-project/remoteConfig:listVersions",
                       params={"pageSize": 3, "pageToken": first["nextPageToken"]}, timeout=10).json()
    assert [v["versionNumber"] for v in rest["versions"]] == ["1"] and "nextPageToken" not in rest
    current = session.get(f"{base}/v1/projects/demo-project/remoteConfig", timeout=10)
    assert current.json()["parameters"]["welcome"]["defaultValue"]["value"] == "Hello"  # rolled back to version 1
    assert current.json()["version"]["versionNumber"] == "4" and current.headers["etag"] == "etag-demo-project-4"
    second = session.get(f"{base}/v1/projects/demo-project/remoteConfig", params={"versionNumber": 2}, timeout=10).json()
    assert second["parameters"]["welcome"]["defaultValue"]["value"] == "Hola"
    missing = session.get(f"{base}/v1/projects/demo-project/remoteConfig", params={"versionNumber": 99}, timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    messaging_only = service_account.Credentials.from_service_account_file(
        str(emulator["key_file"]), scopes=["https://www.googleapis.com/auth/firebase.messaging"])
    refused = AuthorizedSession(messaging_only).get(f"{base}/v1/projects/demo-project/remoteConfig", timeout=10)
    assert refused.status_code == 403 and refused.json()["error"]["status"] == "PERMISSION_DENIED"


def test_development_profile_uses_secrets_and_tokens_from_the_environment_without_printing_them(tmp_path):
    """RC_RELAY_WEBHOOK_SECRETS and RC_RELAY_ADMIN_TOKENS are honoured, and the printed snippets read them from there."""
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    token = "own-admin-token-" + os.urandom(12).hex()
    env = {"RC_RELAY_PORT": "0", "RC_RELAY_WEBHOOK_SECRETS": secret, "RC_RELAY_ADMIN_TOKENS": token}
    proc = Process([BINARY, "serve"], env=env)
    try:
        proc.wait_for(lambda l: "/admin/deliveries" in l)
        output = proc.output
        assert secret not in output and token not in output, "a secret from the environment was printed"
        snippet = output[output.index("SECRET="):output.index("; echo") + len("; echo")]
        shell_env = {**os.environ, **env}
        result = subprocess.run(["bash", "-c", snippet], capture_output=True, text=True, timeout=30, env=shell_env)
        assert json.loads(result.stdout)["status"] == "delivered", result.stdout + result.stderr
        admin = re.search(r'(curl -s -H "Authorization: Bearer \$\{RC_RELAY_ADMIN_TOKENS%% \*\}" http://\S+/admin/deliveries)', output).group(1)
        listed = json.loads(subprocess.run(["bash", "-c", admin], capture_output=True, text=True, timeout=30, env=shell_env).stdout)
        assert [(d["versionNumber"], d["status"]) for d in listed["deliveries"]] == [("42", "accepted")]
    finally:
        proc.stop()


def test_check_config_accepts_the_example_and_names_the_key_of_a_mistake(tmp_path, emulator):
    example = (ROOT / "deploy" / "rc-relay.example.yaml").read_text()
    config = tmp_path / "config.yaml"
    config.write_text(example)
    env = {**os.environ, "RC_RELAY_FCM_CREDENTIALS_FILE": str(emulator["key_file"]), "RC_RELAY_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
    ok = subprocess.run([BINARY, "check-config", str(config)], capture_output=True, text=True, env=env, timeout=30)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK" in ok.stdout
    config.write_text(example.replace("topic: PUSH_RC", "topic: /topics/PUSH_RC", 1))
    bad = subprocess.run([BINARY, "check-config", str(config)], capture_output=True, text=True, env=env, timeout=30)
    assert bad.returncode != 0
    assert "routes[0].topic" in bad.stderr + bad.stdout
    assert "MfKQ9r8" not in bad.stderr + bad.stdout


def test_a_relay_without_a_project_says_it_asks_the_metadata_server_before_it_waits(tmp_path):
    # A metadata server that never answers (off Google Cloud the name may not even resolve): the relay says at once what
    # it waits for, instead of sitting silent through the resolver's timeout, and the stop names the setting.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    config = tmp_path / "rc-relay.yaml"
    config.write_text(
        f"""
server: {{port: 0}}
webhook: {{secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}}
fcm: {{metadataURL: "http://127.0.0.1:{listener.getsockname()[1]}", timeoutSeconds: 1}}
"""
    )
    relay = Process([BINARY, "serve", "--config", str(config)])
    try:
        line = relay.wait_for(lambda l: "asking the metadata server" in l)
        assert "fcm.project is not set" in line and f"127.0.0.1:{listener.getsockname()[1]}" in line
        assert relay.proc.wait(timeout=60) == 78  # EX_CONFIG, as for a mistake in the file
        assert "fcm.project" in relay.output.split("asking the metadata server", 1)[1]
    finally:
        relay.stop()
        listener.close()


def test_a_webhooks_log_is_its_access_line_and_its_decision(relay):
    """docs/operations.md, Logs: besides its access line, a webhook's log at `info` is its decision (a line per ping FCM
    accepted), every line about it carries `event_id`, `project`, `version` and `format`, and the ping's line its
    `route`, `delivery_id`, `attempt` and `fcm_message`. The line that says a webhook was accepted is at `debug`."""
    body = json.dumps({"versionNumber": "5", "updateType": "INCREMENTAL_UPDATE"}).encode()
    headers = {"content-type": "application/json", "X-Request-Id": "log-test-1", **signed_headers(body, "msg_log_1")}
    answer = requests.post(relay["webhook"], data=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    proc = relay["proc"]
    proc.wait_for(lambda l: '"msg":"request"' in l and "log-test-1" in l)
    lines = [json.loads(line) for line in proc.lines if '"log-test-1"' in line]
    logged = [line for line in lines if line["level"] != "debug"]
    assert [line["msg"] for line in logged] == ["ping accepted by FCM", "request"], logged
    decision, access = logged
    assert {k: decision[k] for k in ("event_id", "project", "version", "format")} == {
        "event_id": "msg_log_1", "project": "demo-project", "version": "5", "format": "template-version"}
    assert decision["route"] == "default" and decision["attempt"] == "1"
    assert decision["delivery_id"] and decision["fcm_message"].startswith("projects/demo-project/messages/")
    assert {k: access[k] for k in ("method", "path", "status")} == {"method": "POST", "path": "/webhooks/remote-config", "status": "200"}
    assert access["client"] == access["peer"] == "127.0.0.1" and float(access["duration_ms"]) > 0
    debug = [line for line in lines if line["level"] == "debug"]
    assert [line["msg"] for line in debug] == ["webhook accepted", "sending ping to FCM"]
    # Which replica sent it (docs/replicas.md): `host/pid/random`, in the request's line before it starts, in the
    # decision, and in the delivery history; the audience is the topic.
    sending = debug[1]
    host, pid, _ = decision["replica"].split("/")
    assert int(pid) == proc.proc.pid and host
    assert {k: sending[k] for k in ("replica", "audience", "delivery_id", "attempt", "route", "version")} == {
        k: decision[k] for k in ("replica", "audience", "delivery_id", "attempt", "route", "version")}
    assert decision["audience"] == "PUSH_RC", decision


OTHER_SECRET = "whsec_" + base64.b64encode(b"not the relay's secret, 32 bytes").decode()


def test_every_refusal_is_logged_with_its_status_problem_and_reason(relay):
    """docs/operations.md, Logs: refusals are logged with `status`, `problem` and `reason`, whichever check refused:
    a signature, a project this relay does not send for, an event id reused for another version."""
    unsigned = json.dumps({"versionNumber": "6"}).encode()
    other_project = CloudEvent({"type": UPDATED, "source": "//firebaseremoteconfig.googleapis.com/projects/not-mine", "id": "ce-other",
                                "datacontenttype": "application/json"}, VERSION)
    message = to_binary_event(other_project)
    first = json.dumps({"versionNumber": "7"}).encode()
    reused = json.dumps({"versionNumber": "8"}).encode()
    cases = [
        ("refusal-1", unsigned, {"content-type": "application/json", **signed_headers(unsigned, "msg_r1", secret=OTHER_SECRET)}, 401,
         "invalid-signature"),
        ("refusal-2", message.body, {**message.headers, **signed_headers(message.body)}, 422, "unknown-project"),
        ("refusal-3", first, {"content-type": "application/json", **signed_headers(first, "msg_reused")}, 200, None),
        ("refusal-4", reused, {"content-type": "application/json", **signed_headers(reused, "msg_reused")}, 409, "event-id-conflict"),
    ]
    proc = relay["proc"]
    for request_id, body, headers, status, problem in cases:
        answer = requests.post(relay["webhook"], data=body, headers={**headers, "X-Request-Id": request_id}, timeout=30)
        assert answer.status_code == status, answer.text
        if problem is None:
            continue
        proc.wait_for(lambda l: '"msg":"request"' in l and request_id in l)
        lines = [json.loads(l) for l in proc.lines if f'"{request_id}"' in l and '"msg":"request"' not in l]
        refusals = [line for line in lines if line["level"] != "debug"]
        assert len(refusals) == 1, refusals
        line = refusals[0]
        assert line["level"] == "notice" and line["msg"].startswith("webhook refused"), line
        assert (line["status"], line["problem"]) == (str(status), problem), line
        assert line["reason"] == answer.json()["detail"], line


def test_a_webhook_turned_away_while_stopping_is_logged_as_a_warning(emulator, tmp_path):
    """docs/operations.md, Logs: a refusal is at `warning` when the relay itself is why, and stopping is such a reason:
    during the shutdown delay a webhook is `503 not-ready` with `Retry-After`, logged at `warning` with its reason."""
    relay = start_relay(emulator, tmp_path, "webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}", server="{port: 0, shutdownDelaySeconds: 60}")
    proc = relay["proc"]
    try:
        proc.proc.terminate()
        assert until(lambda: requests.get(relay["url"] + "/readyz", timeout=10).status_code == 503, 30)
        body = json.dumps({"versionNumber": "9"}).encode()
        headers = {"content-type": "application/json", "X-Request-Id": "stopping-1", **signed_headers(body)}
        answer = requests.post(relay["webhook"], data=body, headers=headers, timeout=30)
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "5", answer.text
        assert answer.json()["type"] == "urn:rc-relay:problem:not-ready"
        proc.wait_for(lambda l: '"msg":"request"' in l and "stopping-1" in l)
        refusals = [json.loads(l) for l in proc.lines if '"stopping-1"' in l and '"msg":"request"' not in l]
        assert [(line["level"], line["msg"], line["status"], line["problem"]) for line in refusals] == [
            ("warning", "webhook refused", "503", "not-ready")], refusals
        assert refusals[0]["reason"] == answer.json()["detail"]
        assert recorded(emulator) == []
    finally:
        stop_relay(relay)
