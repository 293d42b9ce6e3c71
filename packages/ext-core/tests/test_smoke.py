import ext.core


def test_version() -> None:
    assert ext.core.__version__ == "0.1.0"
