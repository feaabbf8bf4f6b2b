"""What a call raised or logged, as whole messages, for tests that compare them exactly."""
import pytest


def raised(error, call, *args, **kwargs) -> str:
    """The message of the ``error`` that ``call(*args, **kwargs)`` raises."""
    with pytest.raises(error) as err:
        call(*args, **kwargs)
    return str(err.value)


def logged(caplog, logger: str) -> list[str]:
    """The messages that ``logger`` (by its exact name) put in ``caplog``, in order."""
    return [r.getMessage() for r in caplog.records if r.name == logger]
