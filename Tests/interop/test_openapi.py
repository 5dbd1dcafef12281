"""openapi.yaml is a valid OpenAPI 3.1 document, and the live server's answers match it."""
import json

import jsonschema
import requests
import yaml
from openapi_spec_validator import validate

from conftest import ROOT, signed_headers

SPEC = yaml.safe_load((ROOT / "openapi.yaml").read_text())
WEBHOOK = SPEC["paths"]["/webhooks/remote-config"]["post"]


def check_against_spec(answer):
    """The status is documented for the webhook and the body matches its schema and content type."""
    documented = WEBHOOK["responses"].get(str(answer.status_code))
    assert documented is not None, f"status {answer.status_code} is not in openapi.yaml"
    if "$ref" in documented:
        documented = SPEC["components"]["responses"][documented["$ref"].split("/")[-1]]
    content_type = answer.headers["content-type"].split(";")[0]
    assert content_type in documented["content"], f"{content_type} not documented for {answer.status_code}"
    schema = {**documented["content"][content_type]["schema"], "components": SPEC["components"]}
    jsonschema.validate(answer.json(), schema, cls=jsonschema.Draft202012Validator)
    assert "X-Request-Id" in answer.headers


def post(relay, body: bytes, content_type="application/json", headers=None, sign=True):
    all_headers = {"content-type": content_type, **(signed_headers(body) if sign else {}), **(headers or {})}
    return requests.post(relay["webhook"], data=body, headers=all_headers, timeout=30)


def test_spec_is_valid_openapi():
    validate(SPEC)


def test_spec_examples_match_their_schemas():
    for status, response in WEBHOOK["responses"].items():
        if "$ref" in response:
            response = SPEC["components"]["responses"][response["$ref"].split("/")[-1]]
        for media in response["content"].values():
            schema = {**media["schema"], "components": SPEC["components"]}
            jsonschema.validate(media["example"], schema, cls=jsonschema.Draft202012Validator)


def test_every_answer_matches_the_spec(relay):
    ok = post(relay, json.dumps({"versionNumber": 1}).encode())
    assert ok.status_code == 200
    check_against_spec(ok)
    refusals = [
        (401, post(relay, b'{"versionNumber":1}', sign=False)),
        (413, post(relay, b'{"versionNumber":1,"d":"' + b"x" * 70000 + b'"}')),
        (415, post(relay, b'{"versionNumber":1}', content_type="text/plain")),
        (400, post(relay, b'{"versionNumber":')),
        (422, post(relay, b'{"versionNumber":1}', headers={
            "ce-specversion": "1.0", "ce-id": "1", "ce-type": "com.example.other",
            "ce-source": "//firebaseremoteconfig.googleapis.com/projects/demo-project"})),
    ]
    for status, answer in refusals:
        assert answer.status_code == status, answer.text
        check_against_spec(answer)
    requests.post(relay["emulator"]["url"] + "/emulator/faults", json={"status": 400, "errorCode": "INVALID_ARGUMENT"}, timeout=10)
    failed = post(relay, json.dumps({"versionNumber": 2}).encode())
    assert failed.status_code == 200 and failed.json()["status"] == "failed"
    check_against_spec(failed)
    requests.post(relay["emulator"]["url"] + "/emulator/faults", json={"status": 503, "count": 20}, timeout=10)
    # Still retrying when the answer's wait (10 s) is over, and no spool: 503, come back and join the delivery.
    pending = post(relay, json.dumps({"versionNumber": 3}).encode())
    assert pending.status_code == 503 and pending.json()["type"] == "urn:rc-relay:problem:delivery-in-progress"
    assert int(pending.headers["retry-after"]) >= 1
    check_against_spec(pending)
