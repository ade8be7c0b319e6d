"""The Hub side of a release: the token, the repo id check, the upload."""

from lengthgen.cli import UsageError, check_hub_id


class ReleaseError(UsageError):
    """A release that cannot be made; the message is one line naming the problem."""


def hub_token() -> str | None:
    from huggingface_hub import get_token

    return get_token()


# what a folder may hold that is not the model's: Python's bytecode caches, a release's staging folders
NOT_UPLOADED = ["__pycache__", "__pycache__/*", "*/__pycache__/*", "*.pyc", ".release-*", ".release-*/*"]


def check_push(repo_id: str, push: bool):
    """ReleaseError for a repo id that is not ORG/NAME with the Hub's characters, or for `push` without a Hub token;
    before anything is written."""
    if "/" not in repo_id or repo_id.count("/") > 1 or not all(repo_id.split("/")):
        raise ReleaseError(f"--repo_id must be ORG/NAME, got {repo_id!r}.")
    try:
        check_hub_id(repo_id, "--repo_id")
    except UsageError as error:
        raise ReleaseError(str(error)) from None
    if push and not hub_token():
        raise ReleaseError("--push needs a Hugging Face token: run `hf auth login` or set HF_TOKEN.")


def upload(folder: str, repo_id: str):
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, exist_ok=True)
    api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message="lengthgen release",
                      ignore_patterns=NOT_UPLOADED)
