"""Google's own libraries against rc-relay and its emulator, and Google's discovery documents as the judge.

A. The relay takes Remote Config events as google-events writes them (every to_json form, a rollback, an offset
   timestamp, fields it does not know), in all four ways they arrive.
B. google-api-python-client: FCM by its packaged discovery document, Remote Config by the last one Google published
   (Tests/Fixtures/google), every answer checked against the document's schema.
C. firebase-admin's messaging against the emulator: what it sends, and each error it raises.
D. The relay's own FCM messages are valid by fcm.v1.json.
E. The emulator agrees with fcm.v1.json: every field it names is taken, every field it does not is refused as Google
   refuses it.
"""
import base64
import copy
import importlib.metadata
import importlib.resources
import json
import os
import time
from datetime import datetime, timedelta, timezone

import firebase_admin
import jwt
import pytest
import requests
from cloudevents.core.bindings.http import to_binary_event, to_structured_event
from cloudevents.core.v1.event import CloudEvent
from cryptography.hazmat.primitives.asymmetric import rsa
from firebase_admin import credentials as admin_credentials
from firebase_admin import exceptions as admin_exceptions
from firebase_admin import messaging
from google.auth.transport.requests import AuthorizedSession
from google.events.firebase.remoteconfig_v1.types import (RemoteConfigEventData, RemoteConfigUpdateOrigin,
                                                            RemoteConfigUpdateType, RemoteConfigUser)
from google.oauth2 import service_account
from googleapiclient.discovery import build, build_from_document
from googleapiclient.errors import HttpError, UnknownApiNameOrVersion

import discovery
from conftest import recorded, signed_headers, start_emulator, start_relay, stop_relay, until

PROJECT = "demo-project"
UPDATED = "google.firebase.remoteconfig.remoteConfig.v1.updated"
SOURCE = f"//firebaseremoteconfig.googleapis.com/projects/{PROJECT}"
MESSAGING = "https://www.googleapis.com/auth/firebase.messaging"
REMOTE_CONFIG = "https://www.googleapis.com/auth/firebase.remoteconfig"
FCM = discovery.load("fcm.v1.json")
REMOTE_CONFIG_API = discovery.load("firebaseremoteconfig.v1.json")

# FCM's device addresses: a Firebase installation ID, and registration tokens with and without the installation prefix.
FID = "cW1xd9Tq3kS0ZpL7vYb2Aa"
REGISTRATION_TOKEN = FID + ":APA91b" + "Hq4v-Xg8_3kLm0Zp9QrStUvWxYz12345" * 4
LEGACY_TOKEN = "APA91b" + "Fk2L8mNq0Rs_Tu-VwXy1234567890abcdef"


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    """One emulator for the module; every test starts from an empty record (conftest's `emulator` is per test)."""
    emulator = start_emulator(tmp_path_factory.mktemp("emulator"))
    yield emulator
    emulator["proc"].stop()


@pytest.fixture(autouse=True)
def fresh(emu):
    """Forgets recorded messages, counters, queued faults and templates before each test (issued tokens stay)."""
    assert requests.delete(emu["url"] + "/emulator/messages", timeout=10).status_code == 204


def inject(emu, **fault):
    """Queues a fault for the next `messages:send` requests (EmulatorState.Fault: status, errorCode, retryAfter,
    count, ...)."""
    answer = requests.post(emu["url"] + "/emulator/faults", json=fault, timeout=10)
    assert answer.status_code == 204, answer.text


def stats(emu):
    return requests.get(emu["url"] + "/emulator/stats", timeout=10).json()


def google_credentials(emu, scope):
    return service_account.Credentials.from_service_account_file(str(emu["key_file"]), scopes=[scope])


# --- A. Remote Config events as google-events writes them --------------------------------------------------------

AUDIENCE = "https://relay.example.com/pubsub/remote-config"
PUSHER = "pubsub-push@demo-project.iam.gserviceaccount.com"

ROUTES = """
routes:
  - name: every
    topic: PUSH_RC
    data: {V: "{{version}}", TYPE: "{{updateType}}", ORIGIN: "{{updateOrigin}}", TIME: "{{updateTime}}", SOURCE: "{{rollbackSource}}"}
  - name: rollbacks
    topic: RC_ROLLBACKS
    when: {updateTypes: [ROLLBACK]}
    data: {V: "{{version}}"}
"""


class Pusher:
    """Pub/Sub push's identity: an RSA key in a JWKS file the relay reads, and ID tokens signed with it."""

    def __init__(self, directory):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = directory / "google-certs.json"
        self.jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "push-key", "alg": "RS256", "use": "sig"}]}))

    def token(self):
        now = int(time.time())
        claims = {"iss": "https://accounts.google.com", "aud": AUDIENCE, "email": PUSHER, "email_verified": True,
                  "sub": "1234567890", "iat": now, "exp": now + 3600}
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "push-key"})


@pytest.fixture(scope="module")
def event_relay(emu, tmp_path_factory):
    """A relay that takes signed webhooks and Pub/Sub pushes (`auth: any`: either proof is enough on the webhook path;
    the Pub/Sub path always wants its ID token)."""
    directory = tmp_path_factory.mktemp("event-relay")
    pusher = Pusher(directory)
    relay = start_relay(emu, directory, f"""
webhook: {{auth: any, secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
oidc: {{audiences: ["{AUDIENCE}"], allowedEmails: ["{PUSHER}"], jwksFile: "{pusher.jwks}"}}
""" + ROUTES)
    relay["pusher"] = pusher
    yield relay
    stop_relay(relay)


# Two events: a rollback (every field, the time at +02:00 with microseconds), and a console publish at -05:30.
EVENTS = {
    "rollback": dict(
        event=lambda version: RemoteConfigEventData(
            version_number=version,
            update_time=datetime(2026, 11, 26, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
            update_user=RemoteConfigUser(name="Deploy Bot", email="deploy-bot@demo-project.iam.gserviceaccount.com",
                                         image_url="https://example.com/bot.png"),
            description="Roll back the checkout experiment", update_origin=RemoteConfigUpdateOrigin.REST_API,
            update_type=RemoteConfigUpdateType.ROLLBACK, rollback_source=41),
        time="2026-11-26T10:00:00.123456+02:00",
        expected={"TYPE": "ROLLBACK", "ORIGIN": "REST_API", "TIME": "2026-11-26T08:00:00.123456Z", "SOURCE": "41"}),
    "publish": dict(
        event=lambda version: RemoteConfigEventData(
            version_number=version, update_time=datetime(2026, 11, 26, 2, 30, tzinfo=timezone(-timedelta(hours=5, minutes=30))),
            update_user=RemoteConfigUser(email="dana@example.com"), update_origin=RemoteConfigUpdateOrigin.CONSOLE,
            update_type=RemoteConfigUpdateType.INCREMENTAL_UPDATE),
        time="2026-11-26T02:30:00-05:30",
        expected={"TYPE": "INCREMENTAL_UPDATE", "ORIGIN": "CONSOLE", "TIME": "2026-11-26T08:00:00Z", "SOURCE": ""}),
}
# RemoteConfigEventData.to_json's four forms: (use_integers_for_enums, preserving_proto_field_name).
FORMS = {"enum names, JSON names": (False, False), "enum names, proto names": (False, True),
         "enum numbers, JSON names": (True, False), "enum numbers, proto names": (True, True)}
# The four ways an event arrives, by the `format` the relay's answer names.
KINDS = ("cloudevent-binary", "cloudevent-structured", "pubsub", "template-version")


def event_json(name, form, version):
    """The event as google-events serializes it in `form`, then as a sender in another language may write it: the
    update time at its own offset instead of UTC, and fields this version of the schema does not have."""
    spec = EVENTS[name]
    integers, proto_names = FORMS[form]
    data = json.loads(RemoteConfigEventData.to_json(
        spec["event"](version), use_integers_for_enums=integers, preserving_proto_field_name=proto_names))
    time_key, user_key = ("update_time", "update_user") if proto_names else ("updateTime", "updateUser")
    assert data[time_key].endswith("Z")  # google-events writes UTC
    data[time_key] = spec["time"]
    data[user_key]["futureUserField"] = "kept out"
    data["futureField"] = {"nested": [1, 2.5, None], "flag": True}
    data["future_enum"] = 7
    # Google's own parser takes that body, unknown fields aside, as the same event.
    parsed = RemoteConfigEventData.from_json(json.dumps(data), ignore_unknown_fields=True)
    assert parsed == spec["event"](version)
    return data


def deliver(relay, kind, data, event_id):
    """Sends a template version (`data`, a JSON object) to the relay as `kind` arrives; returns the relay's answer."""
    body_text = json.dumps(data)
    if kind in ("cloudevent-binary", "cloudevent-structured"):
        event = CloudEvent({"type": UPDATED, "source": SOURCE, "id": event_id, "datacontenttype": "application/json"}, data)
        message = to_binary_event(event) if kind == "cloudevent-binary" else to_structured_event(event)
        return requests.post(relay["webhook"], data=message.body, headers={**message.headers, **signed_headers(message.body)}, timeout=30)
    if kind == "pubsub":
        envelope = {
            "message": {
                "data": base64.b64encode(body_text.encode()).decode(), "messageId": event_id,
                "publishTime": "2026-11-26T08:00:01.5Z",
                "attributes": {"ce-specversion": "1.0", "ce-type": UPDATED, "ce-source": SOURCE, "ce-id": event_id},
            },
            "subscription": f"projects/{PROJECT}/subscriptions/rc-relay-push",
        }
        return requests.post(relay["url"] + "/pubsub/remote-config", json=envelope,
                             headers={"authorization": f"Bearer {relay['pusher'].token()}"}, timeout=30)
    body = body_text.encode()
    return requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30)


def pings_of(emu, version):
    """(topic, data) of every recorded message for `version`."""
    return sorted((m["message"]["topic"], m["message"]["data"]) for m in recorded(emu)
                  if m["message"]["data"].get("V") == str(version))


CASES = [(event, form, kind) for event in EVENTS for form in FORMS for kind in KINDS]


@pytest.mark.parametrize("event,form,kind", CASES, ids=[f"{e}, {f}, {k}" for e, f, k in CASES])
def test_the_relay_takes_every_form_google_events_writes(event_relay, emu, event, form, kind):
    version = 1000 + CASES.index((event, form, kind))
    data = event_json(event, form, version)
    answer = deliver(event_relay, kind, data, f"google-events-{version}")
    assert answer.status_code in (200, 202), answer.text
    seen = answer.json()["event"]
    assert (seen["format"], seen["versionNumber"], seen["updateType"]) == (kind, str(version), EVENTS[event]["expected"]["TYPE"])
    expected = [("PUSH_RC", {"V": str(version), **EVENTS[event]["expected"]})]
    if event == "rollback":  # the route for rollbacks only fires: the relay saw ROLLBACK, whether a name or 3
        expected.append(("RC_ROLLBACKS", {"V": str(version)}))
    assert until(lambda: len(pings_of(emu, version)) >= len(expected), 30), recorded(emu)
    pings = pings_of(emu, version)
    without_source = [(topic, {k: v for k, v in data.items() if k != "SOURCE"}) for topic, data in pings]
    assert without_source == [(topic, {k: v for k, v in data.items() if k != "SOURCE"}) for topic, data in sorted(expected)]
    # google-events writes fields at their default too (to_json's always_print_fields_with_no_presence): a publish
    # carries "rollbackSource": "0", which docs/configuration.md's {{rollbackSource}} ("empty unless a rollback") is not.
    ping = dict(pings)["PUSH_RC"]
    assert ping["SOURCE"] == EVENTS[event]["expected"]["SOURCE"], f"{{{{rollbackSource}}}} of a {event}: {ping}"


@pytest.mark.parametrize("as_type", [str, bytes], ids=["text data", "bytes data (data_base64)"])
def test_a_structured_event_whose_data_the_sdk_wrote_as_text_or_bytes_is_taken(event_relay, emu, as_type):
    """`to_json()`'s text handed to the cloudevents SDK as it is: it writes `data` as a JSON string, or as bytes
    `data_base64`. Both carry the version, as the relay's docs say."""
    version = 3000 if as_type is str else 3001
    text = json.dumps(event_json("rollback", next(iter(FORMS)), version))
    data = text if as_type is str else text.encode()
    event = CloudEvent({"type": UPDATED, "source": SOURCE, "id": f"sdk-{version}", "datacontenttype": "application/json"}, data)
    message = to_structured_event(event)
    sent = json.loads(message.body)
    assert ("data" in sent and isinstance(sent["data"], str)) if as_type is str else "data_base64" in sent, sent
    answer = requests.post(event_relay["webhook"], data=message.body, headers={**message.headers, **signed_headers(message.body)}, timeout=30)
    assert answer.status_code in (200, 202), answer.text
    assert (answer.json()["event"]["versionNumber"], answer.json()["event"]["updateType"]) == (str(version), "ROLLBACK")


SPELLINGS = {
    "versionNumber": lambda d: {**d, "version_number": d["versionNumber"]},
    "updateType": lambda d: {**d, "update_type": "FORCED_UPDATE"},
    "updateUser.imageUrl": lambda d: {**d, "updateUser": {**d["updateUser"], "image_url": "https://example.com/other.png"}},
}
DOUBLES = [(field, kind) for field in SPELLINGS for kind in KINDS]


@pytest.mark.parametrize("field,kind", DOUBLES, ids=[f"{f}, {k}" for f, k in DOUBLES])
def test_a_field_under_both_its_names_is_refused(event_relay, emu, field, kind):
    """A field given as both its JSON name and its proto name is refused: which one was meant is not clear."""
    version = 2000 + DOUBLES.index((field, kind))
    data = SPELLINGS[field](event_json("rollback", "enum names, JSON names", version))
    answer = deliver(event_relay, kind, data, f"both-names-{version}")
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["type"] == "urn:rc-relay:problem:malformed-event"
    assert pings_of(emu, version) == []


def test_the_validator_is_strict():
    """The judge of B, D and E holds a value to the form Google writes it in (int64 as a decimal string, enums by
    name, JSON names) and refuses anything a schema does not name; the two leniencies are asked for."""
    version = {"versionNumber": "42", "updateTime": "2026-11-26T10:00:00.5+02:00", "updateType": "ROLLBACK",
               "rollbackSource": "41", "updateUser": {"email": "a@example.com"}, "isLegacy": False}
    assert discovery.errors(REMOTE_CONFIG_API, "Version", version) == []
    wrong = {
        "unknown field": {"versionNumber": "42", "notAField": 1},
        "int64 as a number": {"versionNumber": 42},
        "int64 not decimal": {"versionNumber": "4e2"},
        "int64 past its range": {"versionNumber": str(2**63)},
        "enum name in another case": {"updateType": "rollback"},
        "not a timestamp": {"updateTime": "2026-11-26 10:00:00"},
        "not a day": {"updateTime": "2026-02-30T10:00:00Z"},
        "boolean as a string": {"isLegacy": "false"},
        "object for a string": {"description": {"text": "x"}},
        "unknown field in a referenced schema": {"updateUser": {"mail": "a@example.com"}},
        "proto name": {"version_number": "42"},
    }
    for name, value in wrong.items():
        assert discovery.errors(REMOTE_CONFIG_API, "Version", value), name
    assert discovery.errors(REMOTE_CONFIG_API, "Version", {"version_number": "42"}, proto_names=True) == []
    assert discovery.errors(REMOTE_CONFIG_API, "Version", {"versionNumber": "1", "version_number": "42"}, proto_names=True)
    assert discovery.errors(REMOTE_CONFIG_API, "Version", {"updateType": "rollback"}, enum_any_case=True) == []
    message = {"topic": "T", "data": {"a": "b"}, "android": {"ttl": "3.5s", "notification": {"notificationCount": 3,
               "vibrateTimings": ["0.1s"], "lightSettings": {"color": {"red": 1, "alpha": 0.5}}}}, "apns": {"payload": {"aps": {"x": [1]}}}}
    assert discovery.errors(FCM, "Message", message) == []
    for bad in ({"data": {"a": 12}}, {"android": {"ttl": "3.5"}}, {"android": {"ttl": 3}},
                {"android": {"notification": {"notificationCount": 2**31}}}, {"android": {"notification": {"notificationCount": True}}},
                {"android": {"notification": {"vibrateTimings": "0.1s"}}}, {"android": {"notification": {"lightSettings": {"color": {"red": "1"}}}}},
                {"androidV2": {"backgroundSync": {"x": 1}}}, {"apns": {"payload": []}}):
        assert discovery.errors(FCM, "Message", {"topic": "T", **bad}), bad


# --- B. google-api-python-client ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fcm_api(emu):
    """FCM v1 by the discovery document packaged in google-api-python-client, pointed at the emulator."""
    return build("fcm", "v1", static_discovery=True, credentials=google_credentials(emu, MESSAGING),
                 client_options={"api_endpoint": emu["url"]})


@pytest.fixture(scope="module")
def remote_config_api(emu):
    """Remote Config v1 by the last discovery document Google published (the package no longer has one)."""
    document = (discovery.DOCUMENTS / "firebaseremoteconfig.v1.json").read_text(encoding="utf-8")
    return build_from_document(document, credentials=google_credentials(emu, REMOTE_CONFIG),
                               client_options={"api_endpoint": emu["url"]})


def test_the_fcm_fixture_is_the_pinned_clients_packaged_document():
    assert importlib.metadata.version("google-api-python-client") == "2.202.0"
    packaged = importlib.resources.files("googleapiclient.discovery_cache").joinpath("documents", "fcm.v1.json")
    assert (discovery.DOCUMENTS / "fcm.v1.json").read_bytes() == packaged.read_bytes()
    assert (FCM["id"], FCM["revision"]) == ("fcm:v1", "20261023")


def test_the_remote_config_fixture_is_the_last_published_revision_and_the_package_has_none():
    assert (REMOTE_CONFIG_API["id"], REMOTE_CONFIG_API["revision"]) == ("firebaseremoteconfig:v1", "20240611")
    with pytest.raises(UnknownApiNameOrVersion):
        build("firebaseremoteconfig", "v1", static_discovery=True)


def test_google_api_client_sends_a_topic_ping(fcm_api, emu):
    body = {"message": {"topic": "PUSH_RC", "data": {"CONFIG_STATE": "STALE", "CONFIG_VERSION": "42"}}}
    answer = fcm_api.projects().messages().send(parent=f"projects/{PROJECT}", body=body).execute()
    discovery.assert_valid(FCM, "Message", answer)
    assert answer["name"].startswith(f"projects/{PROJECT}/messages/")
    assert [(m["name"], m["message"]) for m in recorded(emu)] == [(answer["name"], body["message"])]


INVALID = {
    "unknown field in message": {"topic": "PUSH_RC", "notAField": "x"},
    "unknown field in message.android": {"topic": "PUSH_RC", "android": {"notAField": "x"}},
    "data value 12": {"topic": "PUSH_RC", "data": {"v": 12}},
    "reserved data key from": {"topic": "PUSH_RC", "data": {"from": "x"}},
    "two targets": {"topic": "PUSH_RC", "condition": "'PUSH_RC' in topics"},
    "bad topic name": {"topic": "/topics/PUSH RC"},
    "malformed registration token": {"token": "not a registration token"},
}


@pytest.mark.parametrize("message", INVALID.values(), ids=INVALID.keys())
def test_google_api_client_gets_400_for_an_invalid_message(fcm_api, emu, message):
    with pytest.raises(HttpError) as raised:
        fcm_api.projects().messages().send(parent=f"projects/{PROJECT}", body={"message": message}).execute()
    assert raised.value.status_code == 400, raised.value.content
    assert json.loads(raised.value.content)["error"]["status"] == "INVALID_ARGUMENT"
    assert recorded(emu) == []


# status, errorCode, how many requests the client makes (401: google-auth refreshes its token twice and retries).
FAULTS = {"401": (401, None, 3), "403": (403, "SENDER_ID_MISMATCH", 1), "404": (404, "UNREGISTERED", 1),
          "429": (429, "QUOTA_EXCEEDED", 1), "503": (503, "UNAVAILABLE", 1)}


@pytest.mark.parametrize("status,code,attempts", FAULTS.values(), ids=FAULTS.keys())
def test_google_api_client_sees_the_status_of_an_injected_fault(fcm_api, emu, status, code, attempts):
    inject(emu, status=status, errorCode=code, retryAfter="1", count=attempts)
    with pytest.raises(HttpError) as raised:
        fcm_api.projects().messages().send(parent=f"projects/{PROJECT}", body={"message": {"topic": "PUSH_RC"}}).execute()
    assert raised.value.status_code == status
    assert stats(emu)["sendRequests"] == attempts  # every fault queued was used, no other request was made
    assert recorded(emu) == []


def publish(emu, greeting):
    template = {"parameters": {"welcome": {"defaultValue": {"value": greeting}, "valueType": "STRING"}}}
    answer = requests.post(f"{emu['url']}/emulator/remote-config/{PROJECT}/publish", json=template, timeout=10)
    assert answer.ok, answer.text
    return answer.json()


def list_versions(api, **parameters):
    """Every page of listVersions (pageSize 2), each checked against ListVersionsResponse; the version numbers."""
    versions = api.projects().remoteConfig()
    request = versions.listVersions(project=f"projects/{PROJECT}", pageSize=2, **parameters)
    numbers = []
    while request is not None:
        page = request.execute()
        discovery.assert_valid(REMOTE_CONFIG_API, "ListVersionsResponse", page)
        assert len(page.get("versions", [])) <= 2
        numbers += [int(v["versionNumber"]) for v in page.get("versions", [])]
        request = versions.listVersions_next(request, page)
    return numbers


def timestamp(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_google_api_client_pages_the_emulators_versions(remote_config_api, emu):
    for greeting in ("Hello", "Hola", "Bonjour", "Ciao", "Hallo"):
        publish(emu, greeting)
    assert requests.post(f"{emu['url']}/emulator/remote-config/{PROJECT}/rollback?versionNumber=2", timeout=10).ok
    assert list_versions(remote_config_api) == [6, 5, 4, 3, 2, 1]
    assert list_versions(remote_config_api, endVersionNumber="4") == [4, 3, 2, 1]

    listed = remote_config_api.projects().remoteConfig().listVersions(project=f"projects/{PROJECT}").execute()
    discovery.assert_valid(REMOTE_CONFIG_API, "ListVersionsResponse", listed)
    newest = listed["versions"][0]
    assert (newest["updateType"], newest["rollbackSource"]) == ("ROLLBACK", "2")
    times = {int(v["versionNumber"]): timestamp(v["updateTime"]) for v in listed["versions"]}
    start, end = listed["versions"][4]["updateTime"], listed["versions"][1]["updateTime"]  # versions 2 and 5

    def kept(low=None, high=None):
        return [n for n in sorted(times, reverse=True)
                if (low is None or times[n] >= timestamp(low)) and (high is None or times[n] < timestamp(high))]

    # startTime keeps versions updated at or after it, endTime those updated before it.
    assert list_versions(remote_config_api, startTime=start) == kept(low=start)
    assert list_versions(remote_config_api, endTime=end) == kept(high=end)
    assert list_versions(remote_config_api, startTime=start, endTime=end) == kept(start, end)
    assert list_versions(remote_config_api, startTime=start, endTime=end, endVersionNumber="3") == [n for n in kept(start, end) if n <= 3]
    assert 2 in kept(low=start) and 1 not in kept(low=start) and 5 not in kept(high=end)


def test_the_emulators_templates_are_valid_by_the_remote_config_document(remote_config_api, emu):
    template = {
        "conditions": [{"name": "ios_ja", "expression": "device.os == 'ios' && device.language in ['ja']", "tagColor": "BLUE"}],
        "parameters": {"welcome": {"defaultValue": {"value": "Hello"}, "conditionalValues": {"ios_ja": {"value": "Konnichiwa"}},
                                   "valueType": "STRING"}},
        "parameterGroups": {"onboarding": {"description": "first run", "parameters": {"tour": {"defaultValue": {"useInAppDefault": True}}}}},
    }
    assert requests.post(f"{emu['url']}/emulator/remote-config/{PROJECT}/publish", json=template, timeout=10).ok
    fetched = remote_config_api.projects().getRemoteConfig(project=f"projects/{PROJECT}").execute()
    discovery.assert_valid(REMOTE_CONFIG_API, "RemoteConfig", fetched)
    assert fetched["parameters"]["welcome"]["conditionalValues"]["ios_ja"] == {"value": "Konnichiwa"}
    # What Remote Config would refuse, the emulator refuses: an unknown field, a value of the wrong type, an enum it
    # does not define. Nothing is published.
    for bad, field in [
        ({"parameters": {"p": {"defaultValue": {"value": "x"}, "notAField": 1}}}, "notAField"),
        ({"parameters": {"p": {"defaultValue": {"value": 12}}}}, "value"),
        ({"conditions": [{"name": "c", "expression": "true", "tagColor": "SPARKLY"}]}, "tagColor"),
    ]:
        refused = requests.post(f"{emu['url']}/emulator/remote-config/{PROJECT}/publish", json=bad, timeout=10)
        assert refused.status_code == 400 and field in refused.json()["error"]["message"], refused.text
    listed = remote_config_api.projects().remoteConfig().listVersions(project=f"projects/{PROJECT}").execute()
    assert len(listed["versions"]) == 1


# --- C. firebase-admin ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def admin_app(emu):
    """A firebase-admin app with the emulator's key. Its messaging service takes FCM's URL from
    `_MessagingService.FCM_URL` when it is made (on the first send), so that is pointed at the emulator first. Nothing
    else needs pointing for `send`: the token comes from the key file's `token_uri` (the emulator's), the topic
    management URLs (`IID_URL`, `_fcm_topic_url`) are not used, and the retrying adapter mounted for
    https://fcm.googleapis.com is the same as the session's own (4 retries of a 500 or 503)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(messaging._MessagingService, "FCM_URL", emu["url"] + "/v1/projects/{0}/messages:send")
        app = firebase_admin.initialize_app(
            admin_credentials.Certificate(str(emu["key_file"])), {"projectId": PROJECT, "httpTimeout": 30},
            name="rc-relay-interop-" + os.urandom(4).hex())
        assert messaging._get_messaging_service(app)._fcm_url.startswith(emu["url"])
    yield app
    firebase_admin.delete_app(app)


def silent_ping(**target):
    return messaging.Message(
        **(target or {"topic": "PUSH_RC"}), data={"CONFIG_STATE": "STALE", "CONFIG_VERSION": "42"},
        android=messaging.AndroidConfig(priority="normal", ttl=timedelta(hours=24), collapse_key="rc-stale"),
        apns=messaging.APNSConfig(headers={"apns-push-type": "background", "apns-priority": "5"},
                                  payload=messaging.APNSPayload(aps=messaging.Aps(content_available=True))))


def test_firebase_admin_sends_a_silent_ping_and_a_dry_run(admin_app, emu):
    dry = messaging.send(silent_ping(), dry_run=True, app=admin_app)
    assert dry.startswith(f"projects/{PROJECT}/messages/")
    assert recorded(emu) == [] and stats(emu)["validatedOnly"] == 1
    name = messaging.send(silent_ping(), app=admin_app)
    assert [m["name"] for m in recorded(emu)] == [name]
    assert recorded(emu)[0]["message"] == {
        "topic": "PUSH_RC", "data": {"CONFIG_STATE": "STALE", "CONFIG_VERSION": "42"},
        "android": {"priority": "normal", "ttl": "86400s", "collapse_key": "rc-stale"},
        "apns": {"headers": {"apns-push-type": "background", "apns-priority": "5"}, "payload": {"aps": {"content-available": 1}}},
    }
    assert (stats(emu)["accepted"], stats(emu)["validatedOnly"]) == (1, 1)


def everything_firebase_admin_writes():
    """A message with every part firebase-admin can encode (in proto field names, as it writes them)."""
    return messaging.Message(
        fid=FID, data={"k": "v"},
        notification=messaging.Notification(title="Hi", body="Hello", image="https://example.com/i.png"),
        android=messaging.AndroidConfig(
            collapse_key="rc", priority="high", ttl=60, restricted_package_name="com.example.app", data={"a": "b"},
            fcm_options=messaging.AndroidFCMOptions(analytics_label="rc_ping"), direct_boot_ok=True,
            notification=messaging.AndroidNotification(
                title="Hi", body="Hello", icon="ic_stat", color="#1a73e8", sound="default", tag="rc", click_action="OPEN",
                body_loc_key="body", body_loc_args=["x"], title_loc_key="title", title_loc_args=["y"], channel_id="rc",
                image="https://example.com/i.png", ticker="t", sticky=True,
                event_timestamp=datetime(2026, 11, 26, 8, 0, tzinfo=timezone.utc), local_only=True, priority="high",
                vibrate_timings_millis=[100, 200], default_vibrate_timings=False, default_sound=False,
                light_settings=messaging.LightSettings(color="#ff0000", light_on_duration_millis=200, light_off_duration_millis=300),
                default_light_settings=False, visibility="private", notification_count=3, proxy="allow")),
        webpush=messaging.WebpushConfig(
            headers={"TTL": "60", "Urgency": "low"}, data={"w": "x"},
            notification=messaging.WebpushNotification(title="Hi", body="Hello", icon="https://example.com/i.png"),
            fcm_options=messaging.WebpushFCMOptions(link="https://example.com/")),
        apns=messaging.APNSConfig(
            headers={"apns-priority": "10"}, payload=messaging.APNSPayload(aps=messaging.Aps(alert="Hi", badge=1, sound="default")),
            fcm_options=messaging.APNSFCMOptions(analytics_label="rc_ping", image="https://example.com/i.png")),
        fcm_options=messaging.FCMOptions(analytics_label="rc_ping"))


def test_firebase_admin_writes_what_fcm_v1_json_describes_and_the_emulator_takes_it(admin_app, emu):
    encoded = messaging._MessagingService.encode_message(everything_firebase_admin_writes())
    discovery.assert_valid(FCM, "Message", encoded, proto_names=True, enum_any_case=True)
    assert messaging.send(everything_firebase_admin_writes(), dry_run=True, app=admin_app).startswith(f"projects/{PROJECT}/messages/")
    assert stats(emu)["validatedOnly"] == 1


# Messages firebase-admin lets through that FCM refuses.
ADMIN_INVALID = {
    "reserved data key from": dict(topic="PUSH_RC", data={"from": "x"}),
    "reserved data key google.": dict(topic="PUSH_RC", data={"google.sent_time": "1"}),
    "condition of six topics": dict(condition=" || ".join(f"'t{n}' in topics" for n in range(6))),
    "data over 2048 bytes to a topic": dict(topic="PUSH_RC", data={"big": "x" * 2100}),
    "ttl over four weeks": dict(topic="PUSH_RC", android=messaging.AndroidConfig(ttl=timedelta(weeks=5))),
    "malformed registration token": dict(token="not a registration token"),
}


@pytest.mark.filterwarnings("ignore:Message.token is deprecated:DeprecationWarning")
@pytest.mark.parametrize("fields", ADMIN_INVALID.values(), ids=ADMIN_INVALID.keys())
@pytest.mark.parametrize("dry_run", [False, True], ids=["send", "dry run"])
def test_firebase_admin_raises_invalid_argument(admin_app, emu, fields, dry_run):
    with pytest.raises(admin_exceptions.InvalidArgumentError) as raised:
        messaging.send(messaging.Message(**fields), dry_run=dry_run, app=admin_app)
    assert raised.value.http_response.status_code == 400
    assert recorded(emu) == [] and stats(emu)["validatedOnly"] == 0


# status, errorCode, the error firebase-admin raises, how many requests it makes: a 401 is retried after two token
# refreshes (google-auth's AuthorizedSession); a 503, and a 429 that has Retry-After, four times (firebase-admin's
# DEFAULT_RETRY_CONFIG is urllib3's Retry, which honours Retry-After on 413, 429 and 503: 1 s each here).
ADMIN_FAULTS = {
    "401": (401, None, admin_exceptions.UnauthenticatedError, 3),
    "403": (403, None, admin_exceptions.PermissionDeniedError, 1),
    "403 SENDER_ID_MISMATCH": (403, "SENDER_ID_MISMATCH", messaging.SenderIdMismatchError, 1),
    "404 UNREGISTERED": (404, "UNREGISTERED", messaging.UnregisteredError, 1),
    "429 QUOTA_EXCEEDED": (429, "QUOTA_EXCEEDED", messaging.QuotaExceededError, 5),
    "503": (503, None, admin_exceptions.UnavailableError, 5),
}


@pytest.mark.parametrize("status,code,error,attempts", ADMIN_FAULTS.values(), ids=ADMIN_FAULTS.keys())
def test_firebase_admin_raises_the_error_of_an_injected_fault(admin_app, emu, status, code, error, attempts):
    inject(emu, status=status, errorCode=code, retryAfter="1", count=attempts)
    with pytest.raises(error) as raised:
        messaging.send(silent_ping(), app=admin_app)
    assert raised.value.http_response.status_code == status
    assert stats(emu)["sendRequests"] == attempts
    assert recorded(emu) == []


def unregister(emu, *tokens):
    answer = requests.post(emu["url"] + "/emulator/tokens/unregistered", json={"tokens": list(tokens)}, timeout=10)
    assert answer.status_code in (200, 204), answer.text


@pytest.mark.filterwarnings("ignore:Message.token is deprecated:DeprecationWarning")
def test_a_token_the_emulator_was_told_is_unregistered_is_404_unregistered(admin_app, emu):
    gone = FID[:-4] + "gone"
    unregister(emu, gone)
    for dry_run in (True, False):
        with pytest.raises(messaging.UnregisteredError) as raised:
            messaging.send(silent_ping(token=gone), dry_run=dry_run, app=admin_app)
        assert raised.value.http_response.status_code == 404
    assert recorded(emu) == []
    # Another token is untouched.
    name = messaging.send(silent_ping(token=REGISTRATION_TOKEN), app=admin_app)
    assert [(m["name"], m["message"]["token"]) for m in recorded(emu)] == [(name, REGISTRATION_TOKEN)]


TOKENS_OF_FCM_SHAPE = {
    "installation id": FID, "registration token": REGISTRATION_TOKEN, "legacy registration token": LEGACY_TOKEN,
    # An instance ID of 11 characters, as older tokens have (FCM's documentation's own example has this shape).
    "instance id prefix": "bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1",
}
TOKENS_OF_NO_FCM_SHAPE = {
    "text": "not-a-token", "empty prefix": ":" + LEGACY_TOKEN, "prefix of 10": FID[:10] + ":" + LEGACY_TOKEN[:40],
    "prefix of 23": FID + "x:" + LEGACY_TOKEN[:40], "too short after the prefix": FID + ":" + "x" * 19,
    "APA91b too short": "APA91b" + "x" * 19, "installation id of 23": FID + "x", "installation id starting with a": "a" + FID[1:],
    "base64 padding": LEGACY_TOKEN + "==", "slash": LEGACY_TOKEN[:20] + "/" + LEGACY_TOKEN[21:],
}


@pytest.mark.filterwarnings("ignore:Message.token is deprecated:DeprecationWarning")
@pytest.mark.parametrize("token", TOKENS_OF_FCM_SHAPE.values(), ids=TOKENS_OF_FCM_SHAPE.keys())
def test_a_token_of_fcm_shape_is_accepted(admin_app, emu, token):
    assert messaging.send(silent_ping(token=token), dry_run=True, app=admin_app).startswith(f"projects/{PROJECT}/messages/")


@pytest.mark.filterwarnings("ignore:Message.token is deprecated:DeprecationWarning")
@pytest.mark.parametrize("token", TOKENS_OF_NO_FCM_SHAPE.values(), ids=TOKENS_OF_NO_FCM_SHAPE.keys())
def test_a_token_of_no_fcm_shape_is_invalid_argument(admin_app, emu, token):
    with pytest.raises(admin_exceptions.InvalidArgumentError) as raised:
        messaging.send(silent_ping(token=token), dry_run=True, app=admin_app)
    assert json.loads(raised.value.http_response.content)["error"]["status"] == "INVALID_ARGUMENT"


# --- D. The relay's own messages ---------------------------------------------------------------------------------

RELAY_ROUTES = """
routes:
  - name: plain
    topic: PUSH_RC
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
  - name: waved
    waves: {shards: 2, spreadSeconds: 1, topic: "PUSH_RC_{shard}"}
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
  - name: tuned
    condition: "'ios' in topics || 'android' in topics"
    data: {CONFIG_VERSION: "{{version}}", TYPE: "{{updateType}}", TIME: "{{updateTime}}", BY: "{{authorEmail}}"}
    android: {priority: high, collapseKey: rc-config, ttlSeconds: 3600}
    apns: {collapseId: rc-config}
    webpush: {ttlSeconds: 600, urgency: very-low}
"""


def test_the_relays_messages_are_valid_by_fcm_v1_json(emu, tmp_path):
    """FCM's JSON parser takes proto field names (the relay writes `collapse_key`, as FCM's own examples do) and
    `AndroidConfig.priority` in lower case (fcm.v1.json: it "can take "normal" and "high" values"): the validator is
    told so; anything else the document does not name fails."""
    # A wave is answered 202 once spooled (docs/waves.md), so the relay has a spool.
    relay = start_relay(emu, tmp_path, f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
delivery: {{answerWithinSeconds: 5, spoolDirectory: "{tmp_path / 'spool'}"}}
""" + RELAY_ROUTES)
    try:
        body = json.dumps({"versionNumber": "77", "updateType": "FORCED_UPDATE", "updateTime": "2026-11-26T08:00:00.5Z",
                           "updateUser": {"email": "dana@example.com"}, "updateOrigin": "CONSOLE"}).encode()
        answer = requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30)
        assert answer.status_code in (200, 202), answer.text
        assert until(lambda: len(recorded(emu)) >= 4, 30), recorded(emu)
        messages = [m["message"] for m in recorded(emu)]
        targets = sorted(m.get("topic") or m.get("condition") for m in messages)
        assert targets == ["'ios' in topics || 'android' in topics", "PUSH_RC", "PUSH_RC_0", "PUSH_RC_1"]
        for message in messages:
            discovery.assert_valid(FCM, "Message", message, proto_names=True, enum_any_case=True)
            # And without the leniencies, only those two departures remain.
            strict = discovery.errors(FCM, "Message", message)
            assert all('unknown field "collapse_key"' in p or p.endswith("got \"normal\"") or p.endswith("got \"high\"")
                       for p in strict), strict
    finally:
        stop_relay(relay)


# --- E. The emulator agrees with fcm.v1.json ---------------------------------------------------------------------

TOPIC_MESSAGE = {"topic": "PUSH_RC"}
TARGETS = {"topic": "PUSH_RC", "condition": "'PUSH_RC' in topics", "token": REGISTRATION_TOKEN, "fid": FID}
# Values FCM checks beyond their type, by field name (anywhere in the message).
VALUES = {
    "color": "#1a73e8", "image": "https://example.com/ping.png", "link": "https://example.com/", "analyticsLabel": "rc_ping",
    "restrictedPackageName": "com.example.app", "liveActivityToken": "80f3c1a5" * 8, "sound": "default",
    "name": f"projects/{PROJECT}/messages/0:1", "collapseKey": "rc-stale",
    "data": {"CONFIG_STATE": "STALE"}, "payload": {"aps": {"badge": 1}}, "notification": {"title": "Hi"},
}
# By path: the message (a target is required), and maps whose keys FCM reads (APNs and Web Push headers).
PATH_VALUES = {("message",): TOPIC_MESSAGE, ("message", "apns", "headers"): {"apns-collapse-id": "rc-stale"}, ("message", "webpush", "headers"): {"TTL": "60", "Urgency": "low"}}
# Fields FCM takes only with another one (as firebase-admin checks too).
COMPANIONS = {"bodyLocArgs": {"bodyLocKey": "body_key"}, "titleLocArgs": {"titleLocKey": "title_key"}}


def required(schema):
    """The fields a schema's description marks `Required.`."""
    return [name for name, prop in schema.get("properties", {}).items() if prop.get("description", "").startswith("Required.")]


def sample(prop, path):
    """A valid value for a field of schema `prop` at `path`: an object is its smallest valid form (its required
    fields only)."""
    name = path[-1]
    if path in PATH_VALUES:
        return copy.deepcopy(PATH_VALUES[path])
    if len(path) == 2 and path[0] == "message" and name in TARGETS:
        return TARGETS[name]
    schema = discovery.resolve(FCM, prop)
    if "$ref" in prop:
        return {field: sample(schema["properties"][field], path + (field,)) for field in required(schema)}
    if name in VALUES:
        return copy.deepcopy(VALUES[name])
    kind, fmt = schema.get("type"), schema.get("format")
    if "enum" in schema:
        return next(value for value in schema["enum"] if not value.endswith("_UNSPECIFIED"))
    if kind == "boolean":
        return True
    if kind == "integer":
        return 1
    if kind == "number":
        return 0.5
    if kind == "array":
        return ["0.1s", "0.2s"] if schema["items"].get("format") == "google-duration" else ["x"]
    if kind == "object":  # a map
        return {"k": "v"} if schema["additionalProperties"].get("type") == "string" else {"k": 1}
    if fmt == "google-duration":
        return "60s"
    if fmt == "google-datetime":
        return "2026-11-26T08:00:00Z"
    assert kind == "string" and fmt is None, (path, schema)
    return "x"


def request_setting(path, value):
    """A validate-only send request whose message has a topic target (or the target `path` names) and `value` at
    `path`, every object on the way in its smallest valid form."""
    request = {"message": dict(TOPIC_MESSAGE), "validateOnly": True}
    if len(path) == 2 and path[0] == "message" and path[1] in TARGETS:
        request["message"] = {}
    node, schema = request, FCM["schemas"]["SendMessageRequest"]
    for depth, name in enumerate(path[:-1]):
        prop = schema["properties"][name]
        schema = discovery.resolve(FCM, prop)
        if name not in node:
            node[name] = sample(prop, path[:depth + 1])
        node = node[name]
    node[path[-1]] = value
    node.update({k: v for k, v in COMPANIONS.get(path[-1], {}).items() if k not in node})
    return request


FIELDS = [(path, prop) for path, prop, _ in discovery.fields(FCM, "SendMessageRequest")]
MESSAGES = list(discovery.messages(FCM, "SendMessageRequest"))


@pytest.fixture(scope="module")
def fcm_session(emu):
    return AuthorizedSession(google_credentials(emu, MESSAGING))


def send(emu, session, request):
    return session.post(f"{emu['url']}/v1/projects/{PROJECT}/messages:send", data=json.dumps(request),
                        headers={"content-type": "application/json"}, timeout=10)


@pytest.mark.parametrize("path,prop", FIELDS, ids=[".".join(path) for path, _ in FIELDS])
def test_every_field_of_fcm_v1_json_is_accepted(emu, fcm_session, path, prop):
    request = request_setting(path, sample(prop, path))
    discovery.assert_valid(FCM, "SendMessageRequest", request)  # the test's own request is the document's
    answer = send(emu, fcm_session, request)
    assert answer.status_code == 200, (json.dumps(request), answer.text)
    assert stats(emu)["validatedOnly"] == 1 and recorded(emu) == []


def details(answer):
    return {detail["@type"]: detail for detail in answer.json()["error"].get("details", [])}


FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


@pytest.mark.parametrize("path,schema_id", MESSAGES, ids=[".".join(path) or "request" for path, _ in MESSAGES])
def test_a_field_fcm_v1_json_does_not_name_is_refused_where_it_is(emu, fcm_session, path, schema_id):
    if path:
        prop = {"$ref": schema_id}
        request = request_setting(path, {**sample(prop, path), "notAField": "x"})
    else:
        request = {"message": dict(TOPIC_MESSAGE), "validateOnly": True, "notAField": "x"}
    answer = send(emu, fcm_session, request)
    assert answer.status_code == 400, (json.dumps(request), answer.text)
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and 'Unknown name "notAField"' in error["message"], error
    found = details(answer)
    assert found.get(FCM_ERROR, {}).get("errorCode") == "INVALID_ARGUMENT", error
    assert BAD_REQUEST in found, error
    assert found[BAD_REQUEST]["fieldViolations"][0]["field"] == ".".join(path + ("notAField",)), error


@pytest.mark.parametrize("data,index", [({"v": 12}, 0), ({"a": "x", "b": 12}, 1)], ids=["only value", "second value"])
def test_a_data_value_that_is_not_a_string_is_refused_in_googles_words(emu, fcm_session, data, index):
    answer = send(emu, fcm_session, {"message": {"topic": "PUSH_RC", "data": data}, "validateOnly": True})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"] == f"Invalid value at 'message.data[{index}].value' (TYPE_STRING), 12"
    assert details(answer).get(FCM_ERROR, {}).get("errorCode") == "INVALID_ARGUMENT"


def test_proto_field_names_are_accepted(emu, fcm_session):
    request = {"message": {"topic": "PUSH_RC", "android": {"collapse_key": "rc-stale", "fcm_options": {"analytics_label": "rc"}},
                           "fcm_options": {"analytics_label": "rc_ping"}}, "validate_only": True}
    discovery.assert_valid(FCM, "SendMessageRequest", request, proto_names=True)
    answer = send(emu, fcm_session, request)
    assert answer.status_code == 200, answer.text
    assert stats(emu)["validatedOnly"] == 1 and recorded(emu) == []
