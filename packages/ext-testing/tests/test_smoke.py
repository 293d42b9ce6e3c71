import ext.testing


def test_version() -> None:
    assert ext.testing.__version__ == "0.1.0"
