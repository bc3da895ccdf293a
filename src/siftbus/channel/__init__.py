"""The notification-service layer (CORBA Notification Service 1.1 model)."""
