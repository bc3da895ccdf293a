"""Protocol bridges: MQTT (a client of one broker and of an MQTT broker)."""

from .mqtt import BridgeStats, MqttBridge
from .mqtt_config import MqttSettings, TopicRule, load_mqtt, parse_mqtt
from .registrations import Registration, parse_control

__all__ = ["BridgeStats", "MqttBridge", "MqttSettings", "Registration", "TopicRule",
           "load_mqtt", "parse_control", "parse_mqtt"]
