"""deploy/kserve's manifests load into KServe's own API models (the kserve
Python SDK, installed by scripts/test-python.sh): each document becomes its
kind's model class, every nested value its schema type (the models check
required fields and enums as they are built), and a field the KServe schema
does not have, which the SDK's own loader would drop without a word, fails
here by name. tests/deploy_kserve.py runs the command line the
ServingRuntime gives the container against a local server."""
import pathlib
import re

import pytest

yaml = pytest.importorskip("yaml")
kserve = pytest.importorskip("kserve")
kubernetes = pytest.importorskip("kubernetes")

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kserve"
CLASSES = {("serving.kserve.io/v1alpha1", "ServingRuntime"): "V1alpha1ServingRuntime",
           ("serving.kserve.io/v1beta1", "InferenceService"): "V1beta1InferenceService"}


def model_class(name):
    """A KServe model class, or a Kubernetes one that KServe's nest
    (V1ObjectMeta, V1Container, ...: the kubernetes client package's)."""
    return getattr(kserve.models, name, None) or getattr(kubernetes.client.models, name)


def build(data, klass, where, unknown):
    """data as an instance of the OpenAPI type named klass, the way the
    SDKs' own loaders build one; keys the type does not have go to
    `unknown` (those loaders drop them without a word)."""
    m = re.fullmatch(r"(?i)list\[(.*)\]", klass)
    if m:
        return [build(x, m.group(1), f"{where}[{i}]", unknown) for i, x in enumerate(data)]
    m = re.fullmatch(r"(?i)dict\[str, *(.*)\]|dict\(str, *(.*)\)", klass)
    if m:
        inner = m.group(1) or m.group(2)
        return {k: build(v, inner, f"{where}.{k}", unknown) for k, v in data.items()}
    if klass in ("str", "int", "float", "bool", "object", "datetime", "date"):
        return data
    cls = model_class(klass)
    types = getattr(cls, "openapi_types", None) or cls.swagger_types
    unknown.extend(f"{where}.{k}" for k in data if k not in cls.attribute_map.values())
    kwargs = {attr: build(data[key], types[attr], f"{where}.{key}", unknown)
              for attr, key in cls.attribute_map.items() if key in data}
    return cls(**kwargs)


def documents():
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


def test_every_manifest_is_a_kserve_kind():
    kinds = {(d["apiVersion"], d["kind"]) for _, d in documents()}
    assert kinds == set(CLASSES), kinds


@pytest.mark.parametrize("name,doc", list(documents()), ids=lambda x: x if isinstance(x, str) else "")
def test_manifest_loads_into_the_kserve_models(name, doc):
    cls = CLASSES[(doc["apiVersion"], doc["kind"])]
    unknown = []
    obj = build(doc, cls, name, unknown)
    assert type(obj).__name__ == cls
    assert not unknown, f"fields KServe's {cls} does not have: {unknown}"


def test_a_field_kserve_does_not_know_is_caught():
    """The check above can fail: a misspelt field is named."""
    doc = next(d for _, d in documents() if d["kind"] == "InferenceService")
    bad = {**doc, "spec": {**doc["spec"], "predictr": doc["spec"]["predictor"]}}
    unknown = []
    build(bad, "V1beta1InferenceService", "isvc", unknown)
    assert unknown == ["isvc.spec.predictr"]
