"""Image names (tasks/runtimes/images.py): which images are the project's."""

from __future__ import annotations

from tasks.runtimes.images import ImageRef, is_project_image, project_image


def test_project_image_names():
    assert project_image("kserve") == "serving-eval/kserve" and is_project_image("serving-eval/kserve:0123")
    assert not is_project_image("nvcr.io/nvidia/tritonserver:24.10-py3")
    ref = ImageRef("serving-eval/kserve:0123", "sha256:abc", "project")
    assert ref.label == "serving-eval/kserve:0123@sha256:abc"
