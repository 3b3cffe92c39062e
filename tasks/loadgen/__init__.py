"""The load generator, split as MLPerf LoadGen is: settings (what load), the system under test (a server
endpoint reached through a protocol codec), and the engine that issues requests and records what happened.
It records; `tasks.validate.expectations` judges."""
