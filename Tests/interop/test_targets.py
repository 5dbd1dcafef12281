"""HTTP targets (docs/targets.md): a route's signed call or chat message describing each version, checked by the
reference libraries (standardwebhooks, slack_sdk's block models, Google's Chat message types), against the documented
JSON Schema in openapi.yaml, and through faults: 503 then 200, 429 with Retry-After, 410, a receiver that never
answers, a TLS receiver whose certificate is not trusted."""
import base64
import json
import os
import re
import time

import jsonschema
import pytest
import requests
import yaml
from standardwebhooks.webhooks import Webhook

from certificates import make_certificates
from conftest import BINARY, ROOT, SECRET, Process, signed_headers, start_relay, stop_relay, until
from receivers import Receiver

TARGET_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
OLD_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
ADMIN = "admin-" + os.urandom(8).hex()
PROJECT = "demo-project"


def event_schema():
    """The documented body, `TemplateUpdatedEvent`, with the components it refers to."""
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    schemas = spec["components"]["schemas"]
    request = spec["webhooks"]["templateUpdated"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return {**request, "components": {"schemas": schemas}}


def publish(emulator, parameters):
    template = {"parameters": {name: {"defaultValue": {"value": value}} for name, value in parameters.items()}}
    answer = requests.post(f"{emulator['url']}/emulator/remote-config/{PROJECT}/publish", json=template, timeout=10)
    assert answer.ok, answer.text
    return int(answer.json()["versionNumber"])


def announce(relay, version, email="release@example.com"):
    body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE", "updateOrigin": "CONSOLE",
                       "updateUser": {"email": email}, "updateTime": "2026-12-04T10:00:00Z",
                       "description": "welcome <copy> & more"}).encode()
    answer = requests.post(relay["webhook"], data=body, headers={**signed_headers(body), "content-type": "application/json"},
                           timeout=30)
    # 503 delivery-in-progress: the answer could not wait for the target's retries; the delivery goes on.
    assert answer.status_code in (200, 202) or "delivery-in-progress" in answer.text, answer.text
    return answer


def deliveries(relay, route):
    listed = requests.get(f"{relay['url']}/admin/deliveries", params={"route": route},
                          headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10).json()["deliveries"]
    return listed


def settled(relay, route, count=1, timeout=60):
    """The route's deliveries once `count` of them settled."""
    found = []

    def done():
        found[:] = [d for d in deliveries(relay, route) if d["status"] != "pending"]
        return len(found) >= count

    assert until(done, timeout), deliveries(relay, route)
    return found


def relay_with(emulator, tmp_path, webhook, extra="", env=None):
    routes = f"""
remoteConfig: {{baseURL: "{emulator['url']}"}}
admin: {{tokens: ["{ADMIN}"]}}
delivery: {{baseDelaySeconds: 1, maxDelaySeconds: 2}}
routes:
  - {{name: default, topic: PUSH_RC, data: {{CONFIG_STATE: STALE}}}}
  - {{name: notify, webhook: {webhook}}}
{extra}
"""
    return start_relay(emulator, tmp_path, "webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}" + routes, env=env)


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.stop()


def test_a_publish_in_the_development_profile_reaches_a_standard_receiver_signed_and_described(tmp_path, receiver):
    """The issue's first "done when": the development profile, told of a receiver, describes a publish to it, signed
    (standardwebhooks verifies it), in the documented schema, with the change `POST /admin/preview` shows."""
    inbound = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    env = {"RC_RELAY_PORT": "0", "RC_RELAY_DEV_SECRET": inbound, "RC_RELAY_ADMIN_TOKENS": ADMIN,
           "RC_RELAY_DEV_TARGET_URL": receiver.url, "RC_RELAY_DEV_TARGET_SECRET": TARGET_SECRET}
    proc = Process([BINARY, "serve"], env=env)
    try:
        proc.wait_for(lambda l: "/admin/deliveries" in l)
        # Catch-up polling adopts version 42 first: a version published before that would be adopted, not pinged.
        assert proc.saw("poll: adopted the current version without a ping")
        output = proc.output
        relay_url = re.search(r"(http://\S+)/admin/deliveries", output).group(1)
        emulator_url = re.search(r"curl -s (http://\S+)/emulator/messages", output).group(1)
        assert TARGET_SECRET not in output and receiver.url not in output
        template = {"parameters": {"welcome": {"defaultValue": {"value": "v42"},
                                               "conditionalValues": {"lang_ja": {"value": "ようこそ"}}}},
                    "conditions": [{"name": "lang_ja", "expression": "device.language in ['ja']"}]}
        published = requests.post(f"{emulator_url}/emulator/remote-config/{PROJECT}/publish", json=template, timeout=10)
        version = published.json()["versionNumber"]
        assert version == "43"
        # No webhook announces it: catch-up polling finds it, and the route's target hears of it.
        assert until(lambda: receiver.calls, 120), proc.output
        call = receiver.calls[0]
        payload = Webhook(TARGET_SECRET).verify(call["body"].decode(), call["headers"])
        jsonschema.validate(json.loads(call["body"]), event_schema())
        assert payload["type"] == "remoteconfig.template.updated"
        data = payload["data"]
        assert (data["project"], data["versionNumber"], data["route"]) == (PROJECT, "43", "notify")
        assert data["audiences"] == ["topic:PUSH_RC"]
        assert data["change"]["known"] is True
        assert [p["name"] for p in data["change"]["parameters"]] == ["welcome"]
        assert [c["name"] for c in data["change"]["conditions"]] == ["lang_ja"]
        preview = requests.post(f"{relay_url}/admin/preview", json={"version": {"versionNumber": "43"}},
                                headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30).json()
        assert data["change"] == preview["change"]
        assert [r["route"] for r in preview["requests"]] == ["default", "notify"]
        assert preview["requests"][1]["body"]["data"]["change"] == preview["change"]
        assert receiver.url not in json.dumps(preview) and "/hooks/rc" not in json.dumps(preview)
        assert call["headers"]["webhook-id"].startswith("msg_")
    finally:
        proc.stop()
    assert TARGET_SECRET not in proc.output and TARGET_SECRET[6:] not in proc.output
    assert "/hooks/rc" not in proc.output, "the target's URL reached the log"


def test_a_standard_call_is_signed_by_every_secret_and_keeps_its_id_across_a_503(emulator, tmp_path):
    receiver = Receiver(script=[(503, {})])
    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}", "{OLD_SECRET}"]}}')
    try:
        publish(emulator, {"a": "1"})
        version = publish(emulator, {"a": "2", "b": "3"})
        announce(relay, version)
        first, second = receiver.wait_for_calls(2)
        for call in (first, second):
            for secret in (TARGET_SECRET, OLD_SECRET):  # during a rotation, a receiver that knows either verifies
                Webhook(secret).verify(call["body"].decode(), call["headers"])
        assert first["headers"]["webhook-id"] == second["headers"]["webhook-id"]
        assert first["body"] == second["body"]
        data = json.loads(second["body"])["data"]
        assert data["updateUser"] == {"email": "release@example.com"}
        assert data["description"] == "welcome <copy> & more"
        assert {(p["name"], p["kind"]) for p in data["change"]["parameters"]} == {("a", "changed"), ("b", "added")}
        [delivery] = settled(relay, "notify")
        assert delivery["status"] == "accepted", delivery
        assert [a.get("httpStatus") for a in delivery["attempts"]] == [503, 200]
        assert delivery["messageName"] == first["headers"]["webhook-id"]
        # The FCM ping went too, and the metrics count the target's requests under its own service.
        assert settled(relay, "default")[0]["status"] == "accepted"
        metrics = requests.get(f"{relay['url']}/metrics", timeout=10).text
        assert re.search(r'rc_relay_webhook_attempts_total(\{[^}]*\})? 2', metrics), metrics
    finally:
        stop_relay(relay)
        receiver.stop()
    assert TARGET_SECRET[6:] not in relay["proc"].output and "/hooks/rc" not in relay["proc"].output


def test_a_429_waits_its_retry_after_and_a_4xx_is_not_retried(emulator, tmp_path):
    receiver = Receiver(script=[(429, {"Retry-After": "2"}), (200, {}), (400, {})])
    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"]}}')
    try:
        publish(emulator, {"a": "1"})
        announce(relay, publish(emulator, {"a": "2"}))
        first, second = receiver.wait_for_calls(2)
        assert second["at"] - first["at"] >= 1.9, "the Retry-After was undercut"
        assert settled(relay, "notify")[0]["status"] == "accepted"
        announce(relay, publish(emulator, {"a": "3"}))
        refused = settled(relay, "notify", count=2)
        bad = [d for d in refused if d["versionNumber"] == "3"][0]
        assert bad["status"] == "failed" and len(bad["attempts"]) == 1 and bad["attempts"][0]["httpStatus"] == 400
        assert len(receiver.calls) == 3
        # An operator's retry makes the call again, the same call (its id), describing the change again.
        retried = requests.post(f"{relay['url']}/admin/deliveries/{bad['id']}/retry",
                                headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        assert retried.ok and retried.json()["status"] == "accepted", retried.text
        assert until(lambda: len(receiver.calls) >= 4, 30), (retried.json()["messageName"], [l for l in relay["proc"].output.splitlines() if "7e3" in l or "retry" in l][-6:])
        again = receiver.calls[3]
        assert again["headers"]["webhook-id"] == receiver.calls[2]["headers"]["webhook-id"]
        described = json.loads(again["body"])["data"]
        assert described["change"]["parameters"][0]["name"] == "a" and described["audiences"] == ["topic:PUSH_RC"]
        # And an operator's send to the route alone; a device token is refused for it.
        sent = requests.post(f"{relay['url']}/admin/send", json={"version": {"versionNumber": "3"}, "route": "notify"},
                             headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        assert sent.ok and [d["route"] for d in sent.json()["deliveries"]] == ["notify"], sent.text
        assert json.loads(receiver.wait_for_calls(5)[4]["body"])["data"]["versionNumber"] == "3"
        token = requests.post(f"{relay['url']}/admin/send", json={"version": {"versionNumber": "3"}, "route": "notify", "token": "device-token"},
                              headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        assert token.status_code == 400 and token.headers["content-type"].startswith("application/problem+json")
    finally:
        stop_relay(relay)
        receiver.stop()


def test_a_huge_answer_leaves_200_characters_in_the_log_and_the_history(emulator, tmp_path):
    # A 503 with 20 MB of body, then a 200 with as much: the relay keeps 200 characters of the refusal for its history
    # and log, and the call is accepted at the second attempt (the rest of each body is not read: HTTPTargetSender).
    huge = b"<html>" + b"x" * (20 * 1024 * 1024)
    receiver = Receiver(script=[(503, {}, huge), (200, {}, huge)])
    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"]}}')
    try:
        publish(emulator, {"a": "1"})
        announce(relay, publish(emulator, {"a": "2"}))
        [delivery] = settled(relay, "notify")
        assert delivery["status"] == "accepted" and [a["httpStatus"] for a in delivery["attempts"]] == [503, 200]
        assert relay["proc"].saw("127.0.0.1 answered 503: <html>xxx")
        assert "x" * 300 not in relay["proc"].output
    finally:
        stop_relay(relay)
        receiver.stop()


def test_a_410_disables_the_target_until_the_configuration_is_reloaded(emulator, tmp_path):
    receiver = Receiver(script=[(410, {})])
    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"]}}')
    try:
        publish(emulator, {"a": "1"})
        announce(relay, publish(emulator, {"a": "2"}))
        [gone] = settled(relay, "notify")
        assert gone["status"] == "failed" and gone["attempts"][0]["httpStatus"] == 410
        assert relay["proc"].saw("HTTP target disabled: it answered 410 Gone")
        routes = requests.get(f"{relay['url']}/admin/routes", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10).json()
        [notify] = [r for r in routes["projects"][0]["routes"] if r["name"] == "notify"]
        assert "410" in notify["webhook"]["disabled"] and notify["webhook"]["host"] == "127.0.0.1"
        assert "url" not in notify["webhook"] and "/hooks/rc" not in json.dumps(routes)
        # The next version's call is not made: the target is disabled, and the history says why.
        announce(relay, publish(emulator, {"a": "3"}))
        skipped = [d for d in settled(relay, "notify", count=2) if d["versionNumber"] == "3"][0]
        assert skipped["status"] == "failed" and skipped["error"]["errorCode"] == "TARGET_DISABLED", skipped
        assert len(receiver.calls) == 1
        # A reload enables it again.
        reloaded = requests.post(f"{relay['url']}/admin/reload", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        assert reloaded.ok, reloaded.text
        announce(relay, publish(emulator, {"a": "4"}))
        receiver.wait_for_calls(2)
        assert [d for d in settled(relay, "notify", count=3) if d["versionNumber"] == "4"][0]["status"] == "accepted"
    finally:
        stop_relay(relay)
        receiver.stop()


def test_a_receiver_that_never_answers_times_out_and_is_retried(emulator, tmp_path):
    receiver = Receiver(script=["hang", "hang"])
    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"], timeoutSeconds: 1}}')
    try:
        publish(emulator, {"a": "1"})
        announce(relay, publish(emulator, {"a": "2"}))
        receiver.wait_for_calls(3, timeout=60)
        [delivery] = settled(relay, "notify")
        assert delivery["status"] == "accepted", delivery
        assert len(delivery["attempts"]) == 3
        assert [a.get("httpStatus") for a in delivery["attempts"]] == [None, None, 200], delivery["attempts"]
        assert relay["proc"].saw("127.0.0.1 could not be reached: no answer in time")
    finally:
        stop_relay(relay)
        receiver.stop()


def test_a_redirect_is_the_receivers_answer_and_is_never_followed(emulator, tmp_path):
    """targets.md: a call goes to the configured URL only. A `307` (which would keep the method and the signed body)
    and a `302` to another receiver are each refused for good (`failed`, one attempt), and the other receiver gets
    nothing. Until 2026-12-06 the client's default followed up to five redirects, with the signed headers."""
    elsewhere = Receiver()
    receiver = Receiver(script=[(307, {"Location": elsewhere.url}), (302, {"Location": elsewhere.url})])
    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"]}}')
    try:
        publish(emulator, {"a": "1"})
        announce(relay, publish(emulator, {"a": "2"}))
        [first] = settled(relay, "notify")
        assert first["status"] == "failed" and [a["httpStatus"] for a in first["attempts"]] == [307], first
        announce(relay, publish(emulator, {"a": "3"}))
        second = [d for d in settled(relay, "notify", count=2) if d["versionNumber"] == "3"][0]
        assert second["status"] == "failed" and [a["httpStatus"] for a in second["attempts"]] == [302], second
        assert len(receiver.calls) == 2 and elsewhere.calls == []
    finally:
        stop_relay(relay)
        receiver.stop()
        elsewhere.stop()


def test_a_2xx_whose_body_stalls_is_accepted_once_within_the_timeout(emulator, tmp_path):
    """targets.md: the status is the answer and `timeoutSeconds` bounds the whole call. A `200` whose body never comes
    is accepted, once, not held for the client's minute-long read timeout and then retried as unreachable (until
    2026-12-06)."""
    receiver = Receiver(script=["stall"])
    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"], timeoutSeconds: 2}}')
    try:
        publish(emulator, {"a": "1"})
        announce(relay, publish(emulator, {"a": "2"}))
        [delivery] = settled(relay, "notify", timeout=50)
        assert delivery["status"] == "accepted" and [a["httpStatus"] for a in delivery["attempts"]] == [200], delivery
        assert len(receiver.calls) == 1
    finally:
        stop_relay(relay)
        receiver.stop()


def test_tls_is_verified_and_a_ca_file_makes_a_receiver_trusted(emulator, tmp_path):
    certificates = make_certificates(tmp_path / "tls")
    receiver = Receiver(tls=(str(certificates["cert"]), str(certificates["key"])))
    untrusted = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"]}}')
    try:
        publish(emulator, {"a": "1"})
        announce(untrusted, publish(emulator, {"a": "2"}))
        assert untrusted["proc"].saw("ping will be retried")
        [pending] = deliveries(untrusted, "notify")
        assert pending["status"] == "pending" and receiver.calls == []
    finally:
        stop_relay(untrusted)
    (tmp_path / "trusted").mkdir()
    trusted = relay_with(
        emulator, tmp_path / "trusted", f'{{url: "{receiver.url}", secrets: ["{TARGET_SECRET}"], caFile: "{certificates["ca"]}"}}')
    try:
        announce(trusted, publish(emulator, {"a": "3"}))
        [call] = receiver.wait_for_calls(1)
        Webhook(TARGET_SECRET).verify(call["body"].decode(), call["headers"])
        assert settled(trusted, "notify")[0]["status"] == "accepted"
    finally:
        stop_relay(trusted)
        receiver.stop()


def test_a_slack_message_parses_with_slack_sdks_block_models(emulator, tmp_path, receiver):
    from slack_sdk.models.blocks import Block

    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", format: slack}}')
    try:
        publish(emulator, {"welcome": "hi", "gone": "x"})
        announce(relay, publish(emulator, {"welcome": "hello", "new_flag": "1"}))
        [call] = receiver.wait_for_calls(1)
        assert "webhook-signature" not in call["headers"]
        message = json.loads(call["body"])
        blocks = Block.parse_all(message["blocks"])
        for block in blocks:
            block.validate_json()  # Slack's limits: header text at most 150 characters, sections 3,000, …
        assert [b.type for b in blocks] == ["header", "section", "section", "context"]
        assert blocks[0].text.text == "release@example.com published version 2 of demo-project"
        assert "&lt;copy&gt; &amp; more" in blocks[1].text.text
        lines = blocks[2].text.text.split("\n")
        assert lines == ["Changed: welcome (default value)", "Added: new_flag", "Removed: gone"]
        assert "topic:PUSH_RC" in blocks[3].elements[0].text
        assert message["text"].startswith("release@example.com published version 2 of demo-project")
        assert settled(relay, "notify")[0]["status"] == "accepted"
    finally:
        stop_relay(relay)


def test_a_google_chat_message_parses_with_googles_chat_types(emulator, tmp_path, receiver):
    from google.apps.chat_v1.types import Message

    relay = relay_with(emulator, tmp_path, f'{{url: "{receiver.url}", format: googleChat}}')
    try:
        publish(emulator, {"welcome": "hi"})
        announce(relay, publish(emulator, {"welcome": "hello"}))
        [call] = receiver.wait_for_calls(1)
        message = Message.from_json(call["body"].decode(), ignore_unknown_fields=False)  # an unknown field fails
        assert message.text.startswith("release@example.com published version 2 of demo-project: Changed: welcome")
        card = message.cards_v2[0].card
        assert card.header.title == "release@example.com published version 2 of demo-project"
        texts = [w.text_paragraph.text for s in card.sections for w in s.widgets]
        assert "welcome &lt;copy&gt; &amp; more" in texts
        assert "Changed: welcome (default value)" in texts and "Pinged: topic:PUSH_RC" in texts
    finally:
        stop_relay(relay)


@pytest.mark.parametrize("webhook,key,words", [
    ('{url: "http://example.com/x", secrets: ["TARGET"]}', "routes[1].webhook.url", "its scheme is http"),
    ('{url: "https://example.com/x"}', "routes[1].webhook.secrets", "signs its calls"),
    ('{url: "https://hooks.slack.com/services/T0/B0/KEEPME", format: slack, secrets: ["TARGET"]}',
     "routes[1].webhook.secrets", "its URL is its secret"),
    ('{url: "https://example.com/x", format: teams, secrets: ["TARGET"]}', "routes[1].webhook.format", "is not a format"),
    ('{url: "https://example.com/x", secrets: ["not-a-secret"]}', "routes[1].webhook.secrets[0]", "whsec_"),
    ('{url: {env: RC_RELAY_NO_SUCH_VARIABLE}, secrets: ["TARGET"]}', "routes[1].webhook.url", "RC_RELAY_NO_SUCH_VARIABLE"),
    ('{url: "https://example.com/x", secrets: ["TARGET"], caFile: /nonexistent.pem}', "routes[1].webhook.caFile", "PEM"),
])
def test_a_bad_target_is_refused_at_start_naming_its_key_and_never_its_url(emulator, tmp_path, webhook, key, words):
    webhook = webhook.replace("TARGET", TARGET_SECRET)
    config = tmp_path / "rc-relay.yaml"
    config.write_text(f"""
fcm: {{credentialsFile: "{emulator['key_file']}", baseURL: "{emulator['url']}"}}
webhook: {{secrets: ["{SECRET}"]}}
routes:
  - {{name: default, topic: PUSH_RC}}
  - {{name: notify, webhook: {webhook}}}
""")
    result = __import__("subprocess").run([BINARY, "check-config", str(config)], capture_output=True, text=True, timeout=30)
    said = result.stdout + result.stderr
    assert result.returncode != 0
    assert key in said and words in said, said
    assert "KEEPME" not in said and "/x" not in said and TARGET_SECRET not in said


def test_an_fcm_key_on_a_webhook_route_is_refused(emulator, tmp_path):
    config = tmp_path / "rc-relay.yaml"
    config.write_text(f"""
fcm: {{credentialsFile: "{emulator['key_file']}", baseURL: "{emulator['url']}"}}
webhook: {{secrets: ["{SECRET}"]}}
routes:
  - {{name: notify, topic: PUSH_RC, webhook: {{url: "https://example.com/x", secrets: ["{TARGET_SECRET}"]}}}}
""")
    result = __import__("subprocess").run([BINARY, "check-config", str(config)], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "routes[0].topic" in result.stdout + result.stderr
