"""The broker hook: clustered brokers ask the service who may connect and which topics each
may use (contract §9, "Brokers that ask the service")."""
