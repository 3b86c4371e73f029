from tests.integration.devicemanager.conftest import sockdir  # noqa: F401 - a short dir for unix sockets
